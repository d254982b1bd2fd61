// The daemon's observers' contract: what alerts, pings, metrics and the HTTP endpoint (this folder)
// are told by the daemon. It lives with its implementer so that monitor/ never imports daemon/:
// the daemon imports this one file, types only, and commands/ wires the two together.
import type { Config, JobConfig } from "../core/types.js";
import type { RunRow, Store } from "../store/store.js";

/**
 * Observers of the daemon (alerts, pings, metrics, HTTP). Called after the store has recorded the
 * fact; a hook must not block or throw (errors are logged and ignored): monitoring never delays
 * a slot and never loses a run's record.
 */
export interface SupervisorHooks {
  runStarted?(run: RunRow, job: JobConfig): void;
  runEnded?(run: RunRow, job: JobConfig): void;
  /** Every heartbeat, after the beat is recorded. */
  beat?(store: Store, config: Config, now: number): void;
  reloaded?(config: Config): void;
  /** On stop, after the runs are recorded and before the store closes. */
  stopping?(): Promise<void> | void;
}

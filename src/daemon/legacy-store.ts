// TEMPORARY (branch h-store only): the synchronous store API the supervisor and run/execute.ts
// were written against, over the new table-group functions, so this branch builds and passes
// while the async supervisor is written elsewhere. Discard at merge.
import { openConn, type Conn, type OpenOptions } from "../store/connection.js";
import { SqliteStore } from "../store/sqlite-store.js";
import type {
  Alive,
  Owner,
  ReserveOutcome,
  ReserveRequest,
  RunRow,
  SlotRecord,
} from "../store/rows.js";
import type { Store } from "../store/store.js";
import type { RunResult } from "../core/types.js";
import * as daemon from "../store/sqlite/daemon.js";
import * as events from "../store/sqlite/events.js";
import * as history from "../store/sqlite/history.js";
import * as jobs from "../store/sqlite/jobs.js";
import * as runs from "../store/sqlite/runs.js";

export class LegacyStore {
  /** The async Store over the same connection (what the monitor's hooks receive). */
  readonly store: Store;

  private constructor(private readonly c: Conn) {
    this.store = SqliteStore.over(c);
  }

  static open(stateDir: string, opts: OpenOptions): LegacyStore {
    return new LegacyStore(openConn(stateDir, opts));
  }

  close(): void {
    this.c.close();
  }

  /** A transaction; inside another one, fn joins it. */
  tx<T>(fn: () => T): T {
    return this.c.raw.inTransaction ? fn() : this.c.write(fn);
  }

  claimDaemon(me: Owner, now: number, hbMs: number, file: string, alive: Alive) {
    return this.tx(() => daemon.claimDaemon(this.c, me, now, hbMs, file, alive));
  }
  heartbeat(pid: number, now: number, hbMs: number): void {
    daemon.heartbeat(this.c, pid, now, hbMs);
  }
  setConfigError(pid: number, message: string | null): void {
    daemon.setConfigError(this.c, pid, message);
  }
  releaseDaemon(pid: number, now: number): void {
    daemon.releaseDaemon(this.c, pid, now);
  }
  job(name: string) {
    return jobs.jobRow(this.c, name);
  }
  ensureJob(name: string, now: number) {
    return this.tx(() => jobs.ensureJob(this.c, name, now));
  }
  setScannedTo(name: string, at: number): void {
    jobs.setScannedTo(this.c, name, at);
  }
  claimReboot(name: string, bootId: string, now: number): boolean {
    return this.tx(() => jobs.claimReboot(this.c, name, bootId, now));
  }
  pausedJobs(): Set<string> {
    return jobs.pausedJobs(this.c);
  }
  event(at: number, job: string | null, kind: string, detail: string | null): void {
    events.insertEvent(this.c, at, job, kind, detail);
  }
  startRun(req: ReserveRequest): ReserveOutcome {
    return this.tx(() => runs.reserveRun(this.c, req));
  }
  setRunProcess(runId: number, pid: number, pidStart: string | null, pgid: number): void {
    runs.setRunProcess(this.c, runId, pid, pidStart, pgid);
  }
  adoptRun(runId: number, owner: Owner): void {
    runs.adoptRun(this.c, runId, owner);
  }
  revokeRun(runId: number): void {
    runs.revokeRun(this.c, runId);
  }
  finishRun(runId: number, r: RunResult): void {
    this.tx(() => runs.finishRun(this.c, runId, r));
  }
  disposition(
    job: string,
    slot: number,
    status: SlotRecord["status"],
    reason: string,
    now: number,
  ) {
    return runs.insertDisposition(this.c, { job, slot, status, reason }, now);
  }
  recordDisposition(
    job: string,
    slot: number,
    status: SlotRecord["status"],
    reason: string,
    now: number,
  ): boolean {
    return this.tx(() => {
      jobs.ensureJob(this.c, job, now);
      return runs.insertDisposition(this.c, { job, slot, status, reason }, now);
    });
  }
  pruneRuns(job: string, keep: number): string[] {
    return this.tx(() => runs.pruneRuns(this.c, job, keep));
  }
  run(id: number): RunRow | null {
    return history.runRow(this.c, id);
  }
  runningRuns(job?: string): RunRow[] {
    return history.runningRuns(this.c, job);
  }
}

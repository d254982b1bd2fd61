// The shapes the store reads and writes: one per table row, plus the arguments and outcomes of
// the store's compound writes. Types only, importing nothing but core: health, alerts and render
// read rows without loading the SQL modules.
import type { RunResult, RunStatus, Trigger } from "../core/types.js";
import type { Admission, HoldRequest } from "./hold-rows.js";
import type { ChainStart } from "./chain-rows.js";

export interface RunRow {
  id: number;
  job: string;
  slot: number | null;
  trigger: Trigger | null;
  status: RunStatus;
  reason: string | null;
  exit_code: number | null;
  signal: string | null;
  attempt: number;
  started_at: number;
  finished_at: number | null;
  duration_ms: number | null;
  fence: number | null;
  revoked: number;
  owner_pid: number | null;
  owner_start: string | null;
  pid: number | null;
  pid_start: string | null;
  pgid: number | null;
  log_path: string | null;
  log_bytes: number | null;
  progress_at: number | null;
  progress_msg: string | null;
  progress_count: number;
  markers_new: number;
  markers_skipped: number;
  /** The node whose daemon (or `cronvisor run`) started the run. */
  node: string | null;
  /** User + system CPU seconds of all its processes; null before its end or where not measured. */
  cpu_s: number | null;
  /** Its peak memory in bytes; null before its end or where not measured. */
  memory_peak_bytes: number | null;
}

/** The columns of a run that a history entry (`history --json`, `status`'s `last_run`) shows. */
export type HistoryRow = Pick<
  RunRow,
  | "id"
  | "job"
  | "slot"
  | "trigger"
  | "status"
  | "reason"
  | "exit_code"
  | "signal"
  | "attempt"
  | "started_at"
  | "finished_at"
  | "duration_ms"
  | "markers_new"
  | "markers_skipped"
  | "pid"
  | "log_path"
  | "node"
  | "cpu_s"
  | "memory_peak_bytes"
>;

/** The columns of a run the status page's timeline draws (a run's bar, a disposition's tick). */
export type TimelineRow = Pick<
  RunRow,
  | "id"
  | "slot"
  | "trigger"
  | "status"
  | "reason"
  | "exit_code"
  | "signal"
  | "started_at"
  | "finished_at"
  | "duration_ms"
  | "node"
>;

/** What the status page's timelines gained and lost since a read (Store.timelineChanges). */
export interface TimelineChanges {
  /** Per job, the rows inserted since and the asked-for rows as they are now, oldest first. */
  rows: Map<string, TimelineRow[]>;
  /** Per job, how many of its rows finished at or after `since` (none: absent). */
  finished: Map<string, number>;
  /** The newest run id now (0: none): the next read's `afterId`. */
  maxId: number;
}

/** The columns of a run that health is judged from. */
export type RunFacts = Pick<
  RunRow,
  "id" | "status" | "reason" | "started_at" | "finished_at" | "duration_ms" | "progress_at"
>;

export interface JobRow {
  name: string;
  paused: number;
  fence: number;
  scanned_to: number | null;
  reboot_boot_id: string | null;
  last_success_at: number | null;
  last_progress_at: number | null;
  first_seen_at: number | null;
  /** The job's last new work: a new marker or a `progress` call (migration 012). */
  last_work_at: number | null;
  /** Successful runs ended since last_work_at that started after it: did nothing new. */
  idle_runs: number;
}

export interface DaemonRow {
  pid: number | null;
  pid_start: string | null;
  started_at: number | null;
  heartbeat_at: number | null;
  heartbeat_ms: number | null;
  stopped_at: number | null;
  config_file: string | null;
  config_error: string | null;
  /**
   * The running config's hash (sha256 of the file's bytes) and when it was accepted. Its validated
   * form (`config_json`) is read apart, by `runningConfig()`: it can be megabytes, and this row is
   * read by every `status` and every monitor beat.
   */
  config_hash: string | null;
  config_accepted_at: number | null;
  /** Why the http endpoint is not serving (null: serving, or no `http:`), and since when. */
  http_error: string | null;
  http_error_since: number | null;
  /** The node's name (null in a store no daemon has claimed since nodes came). */
  node: string | null;
  /** How the daemon contains its runs, {"mode", "reason"} as JSON (null before migration 011). */
  containment: string | null;
  /** What its run logs took at its last heartbeat (migration 010; null before one). */
  logs_bytes: number | null;
}

/** Who a daemon is among the nodes of a store, recorded when it claims its node. */
export interface NodeSelf {
  name: string;
  /** The machine (os.hostname()) and its boot: a daemon of the same name here is judged by pid. */
  host: string;
  bootId: string | null;
  version: string;
  leaseMs: number;
  /** How this daemon contains its runs, {"mode", "reason"} as JSON; null: not said. */
  containment?: string | null;
}

/** A node as `status` lists it; times by the store's clock but heartbeat_at (the node's own). */
export interface NodeRow {
  name: string;
  pid: number | null;
  host: string | null;
  started_at: number | null;
  heartbeat_at: number | null;
  heartbeat_ms: number | null;
  /** The node's last beat by the store's clock: its lease runs to renewed_at + lease_ms. */
  renewed_at: number | null;
  lease_ms: number | null;
  stopped_at: number | null;
  version: string | null;
  /** The store's clock at the read. */
  db_now: number;
}

/** The config a daemon accepted: its validated form (a Config as JSON) and its file's sha256. */
export interface AcceptedConfig {
  json: string;
  hash: string | null;
  at: number;
}

/** The daemon row's record of the config it runs (or last ran), for commands whose file is broken. */
export interface RunningConfig {
  config_file: string;
  config_json: string;
  config_hash: string | null;
  config_accepted_at: number;
  /** The daemon that recorded it, and whether it stopped: does it still run that config? */
  pid: number | null;
  pid_start: string | null;
  stopped_at: number | null;
}

export interface MarkerRow {
  key: string;
  run_id: number | null;
  fence: number | null;
  created_at: number;
}

export interface EventRow {
  id: number;
  at: number;
  job: string | null;
  kind: string;
  detail: string | null;
}

/** Who holds a `once` claim: the `once` process and, once started, its command. */
export interface ClaimRow {
  /** The node of the `once` process; its liveness elsewhere is its node's lease. */
  node: string | null;
  pid: number;
  pid_start: string | null;
  run_id: number | null;
  cmd_pid: number | null;
  cmd_start: string | null;
}

/** A marker key attempted (claimed by `once`) without being marked. */
export interface AttemptRow {
  key: string;
  count: number;
  last_at: number;
}

/** Per-job gauges for a metrics scrape. */
export interface JobGauge {
  name: string;
  paused: number;
  last_success_at: number | null;
  last_progress_at: number | null;
  running: number;
  markers: number;
}

/** Owner of a run: the process that supervises it (a daemon or `cronvisor run`). */
export interface Owner {
  pid: number;
  start: string | null;
}

/** Is this process (pid + start time: pids are reused) still alive? Supplied by the caller. */
export type Alive = (pid: number, start: string | null) => boolean;

// ---- compound writes: arguments and outcomes ------------------------------------------------

/** Take a job's lock and slot, bump its fence and insert its `running` row (see reserveRun). */
export interface ReserveRequest {
  job: string;
  slot: number | null;
  claimSlot: boolean;
  trigger: Trigger;
  attempt: number;
  /**
   * The clock, read once the write lock is held: a time read before BEGIN IMMEDIATE waited
   * out another writer could be older than the end that writer recorded, and the history
   * would show this run starting before the one it waited for had ended.
   */
  now: number | (() => number);
  owner: Owner;
  /** Take the job's lock (false only for `overlap: allow`). */
  lock: boolean;
  /**
   * false (`backfill`): a claimed slot leaves the job's slot stamp (scanned_to) where it is, and a
   * lock found held records nothing for the slot: a slot filled in the past is not a tick, and
   * the daemon's scan of slots it has not seen yet (missed, caught up) must not skip them.
   */
  stamp?: boolean;
  holderAlive: (run: RunRow) => boolean;
  logPath: (runId: number) => string;
  /** Named locks and a group to hold besides the job's lock (docs/locks.md); absent: none. */
  holds?: HoldRequest;
  /**
   * A shared store's claim of another node's job, made late (daemon/spread.ts): if a run of the
   * job on another node that renewed its lease within this long (alive, perhaps only late to
   * record the run's end) holds the lock, the slot is not claimed (outcome `duplicate`,
   * `yielded`): that node records it, or this one tries again.
   */
  yieldMs?: number;
}

/** A running run's hold on a named lock or a group, with the run (status reads these). */
export type HeldRow = RunRow & { hold_kind: "lock" | "group"; hold_name: string };

export type ReserveOutcome =
  | { kind: "started"; run: RunRow; tookOver?: TakenOver[] }
  | { kind: "locked"; holder: RunRow; lease?: HolderLease }
  /** A named lock or the group refused it (HoldRequest.admit): waiting, or skipped. */
  | { kind: "held"; admission: Exclude<Admission, { kind: "start" }> }
  | { kind: "duplicate"; slotRunId: number | null; yielded?: boolean };

/**
 * The lease that keeps another node's run holding a job's lock (a shared store): the slots it
 * blocks are caught up once it ends, unless that node renews it (it was alive: a plain overlap).
 */
export interface HolderLease {
  node: string;
  /** When the lease ends, by the store's clock. */
  until: number;
  /** How long it had left when it was read, by the store's clock. */
  leftMs: number;
}

/**
 * A run of another node recorded `fenced` by a takeover (its node's lease ran out), with the
 * scheduled slots it had blocked (`skipped` for its lock), oldest first: they are caught up.
 */
export interface TakenOver {
  node: string;
  runId: number;
  slots: number[];
  /** Taken over before the lease's end: that node's daemon and the run died on this machine. */
  diedHere: boolean;
}

/** A slot that did not run: `skipped` (overlap, paused) or `missed` (daemon down). */
export interface SlotRecord {
  job: string;
  slot: number;
  status: "skipped" | "missed";
  reason: string;
}

/** A job's finished runs beyond its newest `keep` are pruned (Store.pruneRuns). */
export interface Prune {
  job: string;
  keep: number;
}

/** One write of a tick's batch: reserve a run, or record a slot's disposition. */
export type TickWrite = { reserve: ReserveRequest } | { dispose: SlotRecord; now: number };
export type TickOutcome = ReserveOutcome | { kind: "recorded"; recorded: boolean };

export interface EventInput {
  job: string | null;
  kind: string;
  detail: string | null;
}

export interface RunProcess {
  runId: number;
  pid: number;
  pidStart: string | null;
  pgid: number;
}

export interface RunEnd {
  runId: number;
  result: RunResult;
  /** Downstream starts (`then:`), written in the same transaction as the end, if it is recorded. */
  chains?: readonly ChainStart[];
}

/**
 * Writes that wait for the next transaction to ride in (Store.reserveRuns): the pids of runs
 * spawned and the ends of runs that exited since, recorded before the transaction's starts (so
 * a start sees a run that exited as ended). On a shared store they cost no commit of their own.
 */
export interface Riders {
  procs: readonly RunProcess[];
  ends: readonly RunEnd[];
}

/** A job the daemon starts watching; `bootId` for an @reboot job (claims this boot's run). */
export interface AddJob {
  name: string;
  bootId: string | null;
}

/** Who writes markers: a run with its fence, or an operator outside any run (no fence check). */
export interface MarkerWriter {
  job: string;
  run: { id: number; fence: number } | null;
}

export type ClaimOutcome =
  | { kind: "done" }
  | { kind: "claimed" }
  /** The writer's fence is stale: nothing was written. */
  | { kind: "stale" }
  /** A live process holds the claim: the `once` itself, or (`by: "command"`) its command. */
  | { kind: "held"; holder: ClaimRow; by: "once" | "command" };

/** A NodeSelf for a claim that names none (tests, tools): this machine, no boot id. */
export function defaultSelf(name: string): NodeSelf {
  return { name, host: name, bootId: null, version: "", leaseMs: 30_000 };
}

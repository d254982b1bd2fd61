// The state store as the rest of cronvisor sees it: what the daemon, the marker path (`mark`,
// `check`, `once`, `progress`, `markers`, `unmark`) and status need, and nothing about SQL.
// Asynchronous, so that an engine with a network round trip (PostgreSQL) can sit beside the
// SQLite one, which resolves at once.
//
// The transaction rule: every method is one whole transaction (or one statement). A caller never
// holds a transaction across an await; what must be atomic is one method here (a tick's batch
// is `reserveRuns`, not a loop of calls). The public library (`Markers`) stays synchronous on its
// own connection.
import type {
  AcceptedConfig,
  AddJob,
  Alive,
  AttemptRow,
  ClaimOutcome,
  ClaimRow,
  DaemonRow,
  EventInput,
  EventRow,
  HistoryRow,
  HeldRow,
  HolderLease,
  JobGauge,
  JobRow,
  MarkerRow,
  MarkerWriter,
  NodeRow,
  NodeSelf,
  Owner,
  Prune,
  ReserveOutcome,
  ReserveRequest,
  RunEnd,
  RunFacts,
  RunProcess,
  Riders,
  RunningConfig,
  RunRow,
  SlotRecord,
  TakenOver,
  TickOutcome,
  TimelineChanges,
  TimelineRow,
  TickWrite,
} from "./rows.js";
import type { MoveMarkers, MoveOutcome } from "./moved.js";
import type { SlotFacts, SlotRun } from "./why-rows.js";
import type { ChainRow, ChainStart, DrainRow } from "./chain-rows.js";
import type { JobReadings, StatusJob, StatusRows, SummaryParses } from "./status-rows.js";
import type { RunResult } from "../core/types.js";

/**
 * What a marker command inside a job needs (`mark`, `check`, `once`, `progress`): a part of the
 * Store of its own, so that the in-job path loads only the marker code (`openMarkerStore`).
 */
export interface MarkerStore {
  close(): Promise<void>;
  /** `check`: is KEY done? A done key counts as skipped work on the writer's run. */
  isDone(w: MarkerWriter, key: string): Promise<boolean>;
  /** New markers written, or null if the writer's fence is stale (nothing written). */
  markDone(w: MarkerWriter, keys: readonly string[], now: number): Promise<number | null>;
  takeClaim(
    w: MarkerWriter,
    key: string,
    me: Owner,
    now: number,
    alive: Alive,
  ): Promise<ClaimOutcome>;
  /** Mark a claimed key and release its claim; false if the fence is stale (nothing written). */
  completeClaim(w: MarkerWriter, key: string, pid: number, now: number): Promise<boolean>;
  releaseClaim(job: string, key: string, pid: number): Promise<void>;
  /** Note the command a claim runs; not fsync'd (it matters only while processes live). */
  setClaimCommand(
    job: string,
    key: string,
    pid: number,
    cmdPid: number,
    cmdStart: string | null,
  ): Promise<void>;
  /** Progress: false (nothing written) unless the writer is its job's live run. */
  reportProgress(w: MarkerWriter, message: string | null, now: number): Promise<boolean>;
}

/** What `status` reads (its SQLite form loads only those table groups: sqlite-status-store.ts). */
export type StatusStore = Pick<
  Store,
  | "shared"
  | "node"
  | "close"
  | "isOpen"
  | "daemon"
  | "runningConfig"
  | "nodes"
  | "jobHashes"
  | "runningRuns"
  | "history"
  | "jobReadings"
  | "statusRows"
  | "holdsHeld"
  | "drain"
> & {
  /**
   * A SQLite store opened `inPlace` (read where it lies, at rest): true when a writer has written
   * the file since, so that what was read may mix its states; the caller opens and reads again.
   */
  changedSinceOpen?(): boolean;
};

export interface Store extends MarkerStore {
  /** False once closed (a reader racing the daemon's stop must not touch a closed store). */
  isOpen(): boolean;
  /**
   * Several nodes may share this store (PostgreSQL): a run or claim of another node is judged by
   * that node's lease, not by a process on this machine. False for SQLite (one machine, one node).
   */
  readonly shared: boolean;
  /** The node this connection writes as (its runs' and claims' `node`). */
  readonly node: string;

  // ---- the daemon singleton
  daemon(): Promise<DaemonRow | null>;
  /** The config the daemon runs or last ran (its validated form), or null if none is recorded. */
  runningConfig(): Promise<RunningConfig | null>;
  /**
   * Claim the state dir (this node's row), recording the config the daemon starts with; returns
   * the live holder that keeps it, or null when claimed.
   */
  claimDaemon(
    me: Owner,
    now: number,
    heartbeatMs: number,
    configFile: string,
    holderAlive: Alive,
    accepted?: AcceptedConfig | null,
    self?: NodeSelf,
  ): Promise<DaemonRow | null>;
  /**
   * The beat, which renews the node's lease; false if the row is no longer this daemon's.
   * `logsBytes`: what the node's run logs take on its disk (status's daemon.disk).
   */
  heartbeat(pid: number, now: number, heartbeatMs: number, logsBytes?: number): Promise<boolean>;
  /** Every node of the store (one with SQLite), with the store's clock. */
  nodes(): Promise<NodeRow[]>;
  /** This node's hash of each job it defines (replacing its earlier list). */
  setJobHashes(hashes: ReadonlyMap<string, string>): Promise<void>;
  jobHashes(): Promise<{ node: string; job: string; hash: string }[]>;
  /** A refused reload: why (the running config stays as recorded). */
  setConfigError(pid: number, message: string | null): Promise<void>;
  setHttpState(pid: number, error: string | null, since: number | null): Promise<void>;
  /** An accepted reload: the new running config, and no refusal, in one transaction. */
  acceptConfig(pid: number, accepted: AcceptedConfig): Promise<void>;
  releaseDaemon(pid: number, now: number): Promise<void>;

  // ---- jobs
  job(name: string): Promise<JobRow | null>;
  allJobs(): Promise<JobRow[]>;
  ensureJob(name: string, now: number): Promise<JobRow>;
  /** Every job the daemon starts watching, in one transaction (see jobs.addJob). */
  addJobs(jobs: readonly AddJob[], now: number): Promise<{ row: JobRow; rebootClaimed: boolean }[]>;
  setPaused(name: string, paused: boolean, now: number): Promise<void>;
  pausedJobs(): Promise<Set<string>>;
  setScannedTo(name: string, at: number): Promise<void>;
  /** Take a job's catch-up: its slot stamp from `from` to `to`; false if another node did. */
  claimCatchUp(name: string, from: number, to: number): Promise<boolean>;
  claimReboot(name: string, bootId: string, now: number): Promise<boolean>;

  // ---- runs, slots and the per-job lock
  /** Take the lock and the slot, bump the fence, insert the `running` row: one transaction. */
  reserveRun(req: ReserveRequest): Promise<ReserveOutcome>;
  /**
   * A tick's reservations and dispositions in one transaction, outcomes in the same order; the
   * `riders` (pids, ends) first, in the same transaction where the engine can (PostgreSQL).
   */
  reserveRuns(items: readonly TickWrite[], riders?: Riders): Promise<TickOutcome[]>;
  /**
   * Take a job over from another node whose lease ran out while its run held the job's lock: the
   * run recorded `fenced`, the slots it blocked returned; or the lease still holding the lock. A
   * store of one node has no other node: nothing to take over.
   */
  takeOver(job: string, now: number): Promise<{ held: HolderLease | null; tookOver: TakenOver[] }>;
  setRunProcess(runId: number, pid: number, pidStart: string | null, pgid: number): Promise<void>;
  setRunProcesses(list: readonly RunProcess[]): Promise<void>;
  adoptRun(runId: number, owner: Owner): Promise<void>;
  revokeRun(runId: number): Promise<void>;
  /** `chains`: downstream starts written with the end (only if this call records it). */
  finishRun(runId: number, result: RunResult, chains?: readonly ChainStart[]): Promise<void>;
  finishRuns(list: readonly RunEnd[]): Promise<void>;

  // ---- chains (`then:`) and the drain (`pause --all`)
  /** Chain starts whose downstream slot has no disposition yet (or had none when last looked). */
  pendingChains(): Promise<ChainRow[]>;
  /** The starts among `list` whose slot now has a disposition: noted on their run, and removed. */
  settleChains(list: readonly { job: string; slot: number }[]): Promise<void>;
  /** The drain as set (an expired `until` included: the caller judges it against now). */
  drain(): Promise<DrainRow | null>;
  /** Set the drain, or end it (null); recorded as an event. */
  setDrain(d: DrainRow | null, now: number): Promise<void>;
  /** A slot that did not run (its job row ensured); false if it already had a disposition. */
  recordDisposition(
    job: string,
    slot: number,
    status: SlotRecord["status"],
    reason: string,
    now: number,
  ): Promise<boolean>;
  /** Dispositions and events in one transaction (catch-up, a gap after a full disk). */
  recordDispositions(
    slots: readonly SlotRecord[],
    now: number,
    events?: readonly EventInput[],
  ): Promise<boolean[]>;
  /**
   * Delete each job's finished runs beyond its newest `keep`, all in one transaction (a commit per
   * run end was a third of the daemon's CPU at 500 runs a second); returns their log paths.
   */
  pruneRuns(prunes: readonly Prune[]): Promise<string[]>;

  // ---- reading runs
  run(id: number): Promise<RunRow | null>;
  /** The last 64 KiB of a finished run's log as a shared store keeps it; null with SQLite. */
  logTail(runId: number): Promise<Buffer | null>;
  runningRuns(job?: string): Promise<RunRow[]>;
  history(job: string | null, limit: number): Promise<RunRow[]>;
  lastRun(job: string): Promise<HistoryRow | null>;
  historyRow(id: number): Promise<HistoryRow | null>;
  recentFinished(job: string, limit: number): Promise<RunFacts[]>;

  /** What `why` explains one slot of a job from, in one snapshot. */
  slotFacts(job: string, slot: number): Promise<SlotFacts>;
  /** What the runs of a job's slots in [from, to] came to, oldest first (`backfill`). */
  slotRuns(job: string, from: number, to: number): Promise<SlotRun[]>;

  // ---- the marker path (the in-job part is MarkerStore's)
  isMarked(job: string, key: string): Promise<boolean>;
  claimHolder(job: string, key: string): Promise<ClaimRow | undefined>;
  markers(job: string): Promise<MarkerRow[]>;
  removeMarker(job: string, key: string, now: number, by: string): Promise<boolean>;
  /** A namespace's markers into another's, unless either job runs; an event in both jobs. */
  moveMarkers(m: MoveMarkers): Promise<MoveOutcome>;
  markerCount(job: string): Promise<number>;
  markerCounts(): Promise<Map<string, number>>;
  repeatingKeys(job: string, limit: number): Promise<Pick<AttemptRow, "key" | "count">[]>;

  // ---- events and alert state
  event(at: number, job: string | null, kind: string, detail: string | null): Promise<void>;
  events(job: string | null, limit: number): Promise<EventRow[]>;
  alertState(job: string): Promise<{ active: string; since: number } | null>;
  setAlertState(job: string, active: string, now: number): Promise<void>;

  // ---- health, status and the monitor
  /** What one job's health is judged from, in one snapshot (no recent run read: its digest). */
  jobReadings(job: string, repeatLimit: number): Promise<JobReadings>;
  /**
   * Everything `status` shows, in one snapshot: one row per job (its summary, migration 006),
   * the running runs and the attempts, and at most SUMMARY_RECENT recent runs (the summary's).
   * `parses`: the summaries as parsed by an earlier read, reused where unchanged and updated.
   */
  statusRows(
    jobs: readonly StatusJob[],
    recentLimit: number,
    parses?: SummaryParses,
  ): Promise<StatusRows>;
  repeatingKeysSince(job: string, limit: number, since: number): Promise<AttemptRow[]>;
  repeatingKeysAll(limit: number): Promise<Map<string, AttemptRow[]>>;
  runsAfter(job: string, afterId: number, limit: number): Promise<RunRow[]>;
  runsRunningOrFinishedSince(job: string, since: number): Promise<RunRow[]>;
  /**
   * Each job's rows (runs and dispositions) running now or finished at or after `since`, oldest
   * first, only the columns a timeline draws, in one snapshot: the status page's timelines.
   */
  timelines(jobs: readonly string[], since: number): Promise<Map<string, TimelineRow[]>>;
  /**
   * What those timelines gained and lost since a read that saw the runs up to `afterId`, in one
   * snapshot: the rows inserted since, the rows `ids` (those running then) as they are now, and
   * each job's count of rows finished at or after `since`, which tells a prune's deletions.
   */
  timelineChanges(
    jobs: readonly string[],
    since: number,
    afterId: number,
    ids: readonly number[],
  ): Promise<TimelineChanges>;
  maxRunId(job: string): Promise<number>;
  jobsChangedSince(
    runId: number,
    eventId: number,
  ): Promise<{ jobs: Set<string>; runId: number; eventId: number }>;
  maxIds(): Promise<{ runId: number; eventId: number }>;
  jobsAttemptedSince(since: number): Promise<string[]>;
  /** Every named lock and group held by a running run (not judged alive: the caller does). */
  holdsHeld(): Promise<HeldRow[]>;
  /** Changes when another connection commits. */
  dataVersion(): Promise<number>;
  jobGauges(): Promise<JobGauge[]>;
}

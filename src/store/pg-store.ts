// The PostgreSQL Store: the same operations, outcomes and row shapes as SqliteStore, over a
// pg.Pool. Each method is one whole transaction on one client (PgConn.write / PgConn.read:
// BEGIN ... COMMIT, ROLLBACK on any error) or one statement (finishRuns: one, after reading the
// log paths it does not know; a transaction would cost a round trip for its COMMIT, at least:
// BEGIN goes with the first statement, pg-connection.ts).
// Where SQLite serialises writers with BEGIN IMMEDIATE, a write here locks the rows of the jobs
// it acts on, in name order (postgres/jobs.ts, lockJobs), and claims slots by their unique key
// (ON CONFLICT), so two daemons, runs or `mark` calls on other connections are serialised per
// job. A tick's writes (postgres/tick.ts) claim their slots first and lock only the jobs they
// then act on.
import type { Store } from "./interface.js";
import type { PgConn, PgOpenOptions } from "./pg-connection.js";
import { openPgConn } from "./pg-connection.js";
import { PgChainStore } from "./pg-chain-store.js";
import type {
  AcceptedConfig,
  AddJob,
  Alive,
  EventInput,
  Owner,
  ReserveOutcome,
  ReserveRequest,
  RunEnd,
  RunProcess,
  SlotRecord,
  TickWrite,
} from "./rows.js";
import type { StatusJob, SummaryParses } from "./status-rows.js";
import type { RunResult } from "../core/types.js";
import * as daemon from "./postgres/daemon.js";
import * as events from "./postgres/events.js";
import * as history from "./postgres/history.js";
import * as jobs from "./postgres/jobs.js";
import * as markers from "./postgres/markers.js";
import * as reconcile from "./postgres/reconcile.js";
import * as runs from "./postgres/runs.js";
import * as status from "./postgres/status.js";
import * as tick from "./postgres/tick.js";
import * as why from "./postgres/why.js";
import { defaultSelf, type NodeSelf } from "./rows.js";

export class PgStore extends PgChainStore implements Store {
  /** The log paths of the runs this store started, for their tails when they end. */
  private readonly logs = new runs.StartedLogs();

  private constructor(c: PgConn) {
    super(c);
  }

  /** Open the store at `url` (postgresql://USER@HOST:PORT/DB), migrating it unless read-only. */
  static async open(url: string, opts: PgOpenOptions): Promise<PgStore> {
    const store = new PgStore(await openPgConn(url, opts));
    store.logs.keep = opts.logTails !== false;
    return store;
  }

  // ---- the daemon rows (one per node)

  async daemon() {
    return daemon.daemonRow(this.c.one, this.c.node);
  }

  async runningConfig() {
    return daemon.runningConfig(this.c.one, this.c.node);
  }

  async nodes() {
    return daemon.nodes(this.c.one);
  }

  async setJobHashes(hashes: ReadonlyMap<string, string>) {
    await this.c.write((q) => daemon.setJobHashes(q, this.c.node, hashes));
  }

  async jobHashes() {
    return daemon.jobHashes(this.c.one);
  }

  async claimDaemon(
    me: Owner,
    now: number,
    hbMs: number,
    file: string,
    holderAlive: Alive,
    accepted: AcceptedConfig | null = null,
    self: NodeSelf = defaultSelf(this.c.node),
  ) {
    const node = { ...self, name: this.c.node };
    return this.c.write((q) =>
      daemon.claimDaemon(q, me, now, hbMs, file, holderAlive, accepted, node),
    );
  }

  async heartbeat(pid: number, now: number, heartbeatMs: number, logsBytes?: number) {
    return this.c.beat((q) =>
      daemon.heartbeat(q, this.c.node, pid, now, heartbeatMs, logsBytes ?? null),
    );
  }

  async setConfigError(pid: number, message: string | null) {
    await this.c.write((q) => daemon.setConfigError(q, this.c.node, pid, message));
  }

  async setHttpState(pid: number, error: string | null, since: number | null) {
    await this.c.write((q) => daemon.setHttpState(q, this.c.node, pid, error, since));
  }

  async acceptConfig(pid: number, accepted: AcceptedConfig) {
    await this.c.write((q) => daemon.acceptConfig(q, this.c.node, pid, accepted));
  }

  async releaseDaemon(pid: number, now: number) {
    await this.c.write((q) => daemon.releaseDaemon(q, this.c.node, pid, now));
  }

  // ---- jobs

  async job(name: string) {
    return jobs.jobRow(this.c.one, name);
  }

  async allJobs() {
    return jobs.allJobs(this.c.one);
  }

  async ensureJob(name: string, now: number) {
    return this.c.write((q) => jobs.ensureJob(q, name, now));
  }

  async addJobs(list: readonly AddJob[], now: number) {
    return this.c.write((q) => jobs.addJobs(q, list, now));
  }

  async setPaused(name: string, paused: boolean, now: number) {
    await this.c.write((q) => jobs.setPaused(q, name, paused, now));
  }

  async pausedJobs() {
    return jobs.pausedJobs(this.c.one);
  }

  async setScannedTo(name: string, at: number) {
    await this.c.write((q) => jobs.setScannedTo(q, name, at));
  }

  async claimCatchUp(name: string, from: number, to: number) {
    return this.c.write((q) => jobs.claimCatchUp(q, name, from, to));
  }

  async claimReboot(name: string, bootId: string, now: number) {
    return this.c.write((q) => jobs.claimReboot(q, name, bootId, now));
  }

  // ---- runs, slots and the per-job lock

  async reserveRun(req: ReserveRequest) {
    const [out] = await this.reserveRuns([{ reserve: req }]);
    return out as ReserveOutcome;
  }

  async reserveRuns(items: readonly TickWrite[]) {
    if (items.length === 0) return [];
    const out = await this.c.write((q) => tick.writeTick(q, items, this.c.node, false, true));
    this.logs.remember(out, this.c.node);
    return out;
  }

  async takeOver(job: string, now: number) {
    return this.c.write((q) => runs.takeOver(q, job, now, this.c.node));
  }

  async setRunProcess(runId: number, pid: number, pidStart: string | null, pgid: number) {
    await this.c.write((q) => runs.setRunProcess(q, runId, pid, pidStart, pgid));
  }

  async setRunProcesses(list: readonly RunProcess[]) {
    if (list.length === 0) return;
    await this.c.write(async (q) => {
      await runs.lockRunJobs(
        q,
        list.map((p) => p.runId),
      );
      await runs.setRunProcesses(q, list);
    });
  }

  async adoptRun(runId: number, owner: Owner) {
    await this.c.write((q) => runs.adoptRun(q, runId, owner));
  }

  async revokeRun(runId: number) {
    await this.c.write((q) => runs.revokeRun(q, runId));
  }

  async finishRun(runId: number, result: RunResult, chained?: RunEnd["chains"]) {
    await this.finishRuns([{ runId, result, ...(chained ? { chains: chained } : {}) }]);
  }

  async finishRuns(list: readonly RunEnd[]) {
    if (list.length === 0) return;
    // A run recorded twice in one batch keeps its first end, as when recorded one after another.
    const seen = new Set<number>();
    const ends = list.filter((e) => !seen.has(e.runId) && seen.add(e.runId));
    const ids = ends.map((e) => e.runId);
    // Any node may be asked for a run's log: keep its tail here (the file stays on this node).
    await runs.recordEnds(this.c.one, ends, await this.logs.tails(this.c.one, ids, this.c.node));
    this.logs.forget(ids);
  }

  async recordDisposition(
    job: string,
    slot: number,
    st: SlotRecord["status"],
    reason: string,
    now: number,
  ) {
    return this.c.write(async (q) => {
      const [out] = await tick.writeTick(
        q,
        [{ dispose: { job, slot, status: st, reason }, now }],
        this.c.node,
        true,
      );
      // A job row made here is first seen now (as SQLite's ensureJob).
      await jobs.ensureJob(q, job, now);
      return out?.kind === "recorded" && out.recorded;
    });
  }

  async recordDispositions(
    slots: readonly SlotRecord[],
    now: number,
    evs: readonly EventInput[] = [],
  ) {
    if (slots.length === 0 && evs.length === 0) return [];
    return this.c.write(async (q) => {
      const out = await tick.writeTick(
        q,
        slots.map((s) => ({ dispose: s, now })),
        this.c.node,
      );
      for (const e of evs) await events.insertEvent(q, now, e.job, e.kind, e.detail);
      return out.map((o) => o.kind === "recorded" && o.recorded);
    });
  }

  async pruneRuns(job: string, keep: number) {
    return this.c.write(async (q) => {
      await jobs.lockJobs(q, [job]);
      return runs.pruneRuns(q, job, keep);
    });
  }

  // ---- reading runs
  async run(id: number) {
    return history.runRow(this.c.one, id);
  }
  async logTail(runId: number) {
    return runs.logTail(this.c.one, runId);
  }
  async slotFacts(job: string, slot: number) {
    return this.c.read((q) => why.slotFacts(q, job, slot, this.c.node));
  }
  async slotRuns(job: string, from: number, to: number) {
    return this.c.read((q) => why.slotRuns(q, job, from, to));
  }
  async runningRuns(job?: string) {
    return history.runningRuns(this.c.one, job);
  }
  async history(job: string | null, limit: number) {
    return history.history(this.c.one, job, limit);
  }
  async lastRun(job: string) {
    return history.lastRun(this.c.one, job);
  }
  async historyRow(id: number) {
    return history.historyRow(this.c.one, id);
  }
  async recentFinished(job: string, limit: number) {
    return history.recentFinished(this.c.one, job, limit);
  }

  // ---- the marker path

  async isMarked(job: string, key: string) {
    return markers.isMarked(this.c.one, job, key);
  }

  async claimHolder(job: string, key: string) {
    return markers.claimHolder(this.c.one, job, key);
  }
  async markers(job: string) {
    return markers.markers(this.c.one, job);
  }

  async removeMarker(job: string, key: string, now: number, by: string) {
    return this.c.write((q) => reconcile.removeMarker(q, job, key, now, by));
  }

  async moveMarkers(m: Parameters<Store["moveMarkers"]>[0]) {
    return this.c.write((q) => reconcile.moveMarkers(q, m, this.c.node));
  }

  async markerCount(job: string) {
    return markers.markerCount(this.c.one, job);
  }

  async markerCounts() {
    return markers.markerCounts(this.c.one);
  }

  async repeatingKeys(job: string, limit: number) {
    return markers.repeatingKeys(this.c.one, job, limit);
  }

  // ---- events and alert state

  async event(at: number, job: string | null, kind: string, detail: string | null) {
    await this.c.write((q) => events.insertEvent(q, at, job, kind, detail));
  }

  async events(job: string | null, limit: number) {
    return events.events(this.c.one, job, limit);
  }

  async alertState(job: string) {
    return events.alertState(this.c.one, job);
  }

  async setAlertState(job: string, active: string, now: number) {
    await this.c.write((q) => events.setAlertState(q, job, active, now));
  }

  // ---- health, status and the monitor

  async jobReadings(job: string, recentLimit: number, repeatLimit: number) {
    return this.c.read((q) => status.jobReadings(q, job, recentLimit, repeatLimit));
  }

  async statusRows(list: readonly StatusJob[], recentLimit: number, parses?: SummaryParses) {
    return this.c.read((q) => status.statusRows(q, list, recentLimit, this.c.node, parses));
  }
  async holdsHeld() {
    return status.holdsHeld(this.c.one);
  }

  async repeatingKeysSince(job: string, limit: number, since: number) {
    return markers.repeatingKeysSince(this.c.one, job, limit, since);
  }

  async repeatingKeysAll(limit: number) {
    return markers.repeatingKeysAll(this.c.one, limit);
  }

  async runsAfter(job: string, afterId: number, limit: number) {
    return history.runsAfter(this.c.one, job, afterId, limit);
  }

  async runsRunningOrFinishedSince(job: string, since: number) {
    return history.runsRunningOrFinishedSince(this.c.one, job, since);
  }

  async timelines(jobs: readonly string[], since: number) {
    // One statement: one snapshot.
    return history.timelines(this.c.one, jobs, since);
  }

  async timelineChanges(
    jobs: readonly string[],
    since: number,
    afterId: number,
    ids: readonly number[],
  ) {
    return history.timelineChanges(this.c.one, jobs, since, afterId, ids);
  }

  async maxRunId(job: string) {
    return history.maxRunId(this.c.one, job);
  }

  async jobsChangedSince(runId: number, eventId: number) {
    return this.c.read((q) => history.jobsChangedSince(q, runId, eventId));
  }

  async maxIds() {
    return history.maxIds(this.c.one);
  }

  async jobsAttemptedSince(since: number) {
    return markers.jobsAttemptedSince(this.c.one, since);
  }

  async dataVersion() {
    return history.dataVersion(this.c.one);
  }

  async jobGauges() {
    return jobs.jobGauges(this.c.one);
  }
}

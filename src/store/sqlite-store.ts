// The SQLite Store: each method is one whole synchronous transaction (Conn.write / Conn.read) or
// one statement, run before the method returns; the promise only carries the result. Never an
// await inside a transaction: better-sqlite3 commits at the first one.
import { openConn, type Conn, type OpenOptions } from "./connection.js";
import type { Store } from "./interface.js";
import { SqliteStatusStore } from "./sqlite-status-store.js";
import type {
  AcceptedConfig,
  AddJob,
  Alive,
  EventInput,
  Owner,
  Prune,
  ReserveRequest,
  RunEnd,
  RunProcess,
  Riders,
  SlotRecord,
  TickOutcome,
  TickWrite,
} from "./rows.js";
import type { MoveMarkers, MoveOutcome } from "./moved.js";
import type { DrainRow } from "./chain-rows.js";
import type { RunResult } from "../core/types.js";
import os from "node:os";
import { defaultSelf, type NodeSelf } from "./rows.js";
import { movedEvents } from "./moved.js";
import * as daemon from "./sqlite/daemon.js";
import * as events from "./sqlite/events.js";
import * as history from "./sqlite/history.js";
import * as jobs from "./sqlite/jobs.js";
import * as markers from "./sqlite/markers.js";
import * as runs from "./sqlite/runs.js";
import * as chains from "./sqlite/chains.js";
import * as why from "./sqlite/why.js";

export class SqliteStore extends SqliteStatusStore implements Store {
  private constructor(c: Conn, node: string) {
    super(c, node);
  }

  /** Open (synchronously: SQLite opens a local file) the store of a state dir. */
  static open(stateDir: string, opts: OpenOptions): SqliteStore {
    return new SqliteStore(openConn(stateDir, opts), opts.node ?? os.hostname());
  }

  /** A store over a connection already open (it is closed with the store). */
  static over(c: Conn): SqliteStore {
    return new SqliteStore(c, os.hostname());
  }

  // ---- the daemon singleton

  async claimDaemon(
    me: Owner,
    now: number,
    hbMs: number,
    file: string,
    holderAlive: Alive,
    accepted: AcceptedConfig | null = null,
    self: NodeSelf = defaultSelf(this.node),
  ) {
    const node = { ...self, name: this.node };
    return this.c.write(() =>
      daemon.claimDaemon(this.c, me, now, hbMs, file, holderAlive, accepted, node),
    );
  }

  async setJobHashes(hashes: ReadonlyMap<string, string>) {
    this.c.write(() => daemon.setJobHashes(this.c, this.node, hashes));
  }

  async heartbeat(pid: number, now: number, heartbeatMs: number, logsBytes?: number) {
    return daemon.heartbeat(this.c, pid, now, heartbeatMs, logsBytes ?? null);
  }

  async setConfigError(pid: number, message: string | null) {
    daemon.setConfigError(this.c, pid, message);
  }

  async setHttpState(pid: number, error: string | null, since: number | null) {
    daemon.setHttpState(this.c, pid, error, since);
  }

  async acceptConfig(pid: number, accepted: AcceptedConfig) {
    daemon.acceptConfig(this.c, pid, accepted);
  }

  async releaseDaemon(pid: number, now: number) {
    daemon.releaseDaemon(this.c, pid, now);
  }

  // ---- jobs

  async job(name: string) {
    return jobs.jobRow(this.c, name);
  }

  async allJobs() {
    return jobs.allJobs(this.c);
  }

  async ensureJob(name: string, now: number) {
    return this.c.write(() => jobs.ensureJob(this.c, name, now));
  }

  async addJobs(list: readonly AddJob[], now: number) {
    return this.c.write(() => list.map((j) => jobs.addJob(this.c, j, now)));
  }

  async setPaused(name: string, paused: boolean, now: number) {
    this.c.write(() => jobs.setPaused(this.c, name, paused, now));
  }

  async pausedJobs() {
    return jobs.pausedJobs(this.c);
  }

  async setScannedTo(name: string, at: number) {
    jobs.setScannedTo(this.c, name, at);
  }

  async claimCatchUp(name: string, from: number, to: number) {
    return this.c.write(() => jobs.claimCatchUp(this.c, name, from, to));
  }

  async claimReboot(name: string, bootId: string, now: number) {
    return this.c.write(() => jobs.claimReboot(this.c, name, bootId, now));
  }

  // ---- runs, slots and the per-job lock

  async reserveRun(req: ReserveRequest) {
    return this.c.write(() => runs.reserveRun(this.c, req, this.node));
  }

  async takeOver(_job: string, _now: number) {
    return { held: null, tookOver: [] };
  }

  async reserveRuns(items: readonly TickWrite[], riders?: Riders) {
    // The daemon folds writes into a tick's only on a shared store: here, each its own write.
    if (riders !== undefined) {
      await this.setRunProcesses(riders.procs);
      await this.finishRuns(riders.ends);
    }
    if (items.length === 0) return [];
    return this.c.write(() =>
      items.map((w): TickOutcome => {
        if ("reserve" in w) return runs.reserveRun(this.c, w.reserve, this.node);
        return {
          kind: "recorded",
          recorded: runs.insertDisposition(this.c, w.dispose, w.now, this.node),
        };
      }),
    );
  }

  async setRunProcess(runId: number, pid: number, pidStart: string | null, pgid: number) {
    runs.setRunProcess(this.c, runId, pid, pidStart, pgid);
  }

  async setRunProcesses(list: readonly RunProcess[]) {
    if (list.length === 0) return;
    this.c.write(() => {
      for (const p of list) runs.setRunProcess(this.c, p.runId, p.pid, p.pidStart, p.pgid);
    });
  }

  async adoptRun(runId: number, owner: Owner) {
    runs.adoptRun(this.c, runId, owner);
  }

  async revokeRun(runId: number) {
    runs.revokeRun(this.c, runId);
  }

  async finishRun(runId: number, result: RunResult, chained?: RunEnd["chains"]) {
    await this.finishRuns([{ runId, result, ...(chained ? { chains: chained } : {}) }]);
  }

  async finishRuns(list: readonly RunEnd[]) {
    if (list.length === 0) return;
    this.c.write(() => {
      for (const e of list) {
        const ended = runs.finishRun(this.c, e.runId, e.result);
        // In the end's transaction: a daemon killed after it starts the chain after a restart.
        if (ended && e.chains) chains.insertChains(this.c, e.chains, e.result.finishedAt);
      }
    });
  }

  async pendingChains() {
    return chains.pendingChains(this.c);
  }

  async settleChains(list: readonly { job: string; slot: number }[]) {
    if (list.length === 0) return;
    this.c.write(() => chains.settleChains(this.c, list));
  }

  async setDrain(d: DrainRow | null, now: number) {
    this.c.write(() => chains.setDrain(this.c, d, now));
  }

  async recordDisposition(
    job: string,
    slot: number,
    status: SlotRecord["status"],
    reason: string,
    now: number,
  ) {
    return this.c.write(() => {
      jobs.ensureJob(this.c, job, now);
      return runs.insertDisposition(this.c, { job, slot, status, reason }, now, this.node);
    });
  }

  async recordDispositions(
    slots: readonly SlotRecord[],
    now: number,
    evs: readonly EventInput[] = [],
  ) {
    if (slots.length === 0 && evs.length === 0) return [];
    return this.c.write(() => {
      for (const e of evs) events.insertEvent(this.c, now, e.job, e.kind, e.detail);
      return slots.map((s) => runs.insertDisposition(this.c, s, now, this.node));
    });
  }

  async pruneRuns(prunes: readonly Prune[]) {
    return this.c.write(() => prunes.flatMap((p) => runs.pruneRuns(this.c, p.job, p.keep)));
  }

  // ---- reading runs

  async run(id: number) {
    return history.runRow(this.c, id);
  }

  async logTail(_runId: number): Promise<Buffer | null> {
    return null; // one node: the log file is here
  }

  async lastRun(job: string) {
    return history.lastRun(this.c, job);
  }

  async historyRow(id: number) {
    return history.historyRow(this.c, id);
  }

  async recentFinished(job: string, limit: number) {
    return history.recentFinished(this.c, job, limit);
  }

  async slotFacts(job: string, slot: number) {
    return this.c.read(() => why.slotFacts(this.c, job, slot));
  }

  async slotRuns(job: string, from: number, to: number) {
    return this.c.read(() => why.slotRuns(this.c, job, from, to));
  }

  // ---- the marker path

  async isMarked(job: string, key: string) {
    return markers.isMarked(this.c, job, key);
  }

  async claimHolder(job: string, key: string) {
    return markers.claimHolder(this.c, job, key);
  }

  async markers(job: string) {
    return markers.markers(this.c, job);
  }

  async removeMarker(job: string, key: string, now: number, by: string) {
    return this.c.write(() => {
      const removed = markers.deleteMarker(this.c, job, key);
      if (removed) events.insertEvent(this.c, now, job, "unmark", `${key} (by ${by})`);
      return removed;
    });
  }

  async moveMarkers(m: MoveMarkers): Promise<MoveOutcome> {
    return this.c.write(() => {
      for (const job of [m.from, m.to]) {
        const run = history.runningRuns(this.c, job).find(m.holderAlive);
        if (run) return { kind: "running" as const, job, run };
      }
      const r = markers.moveMarkerRows(this.c, m.from, m.to);
      for (const [job, detail] of movedEvents(m, r))
        events.insertEvent(this.c, m.now, job, "markers-moved", detail);
      return { kind: "moved" as const, ...r };
    });
  }

  async markerCount(job: string) {
    return markers.markerCount(this.c, job);
  }

  async markerCounts() {
    return markers.markerCounts(this.c);
  }

  async repeatingKeys(job: string, limit: number) {
    return markers.repeatingKeys(this.c, job, limit);
  }

  // ---- events and alert state

  async event(at: number, job: string | null, kind: string, detail: string | null) {
    events.insertEvent(this.c, at, job, kind, detail);
  }

  async events(job: string | null, limit: number) {
    return events.events(this.c, job, limit);
  }

  async alertState(job: string) {
    return events.alertState(this.c, job);
  }

  async setAlertState(job: string, active: string, now: number) {
    events.setAlertState(this.c, job, active, now);
  }

  // ---- health, status and the monitor

  async repeatingKeysSince(job: string, limit: number, since: number) {
    return markers.repeatingKeysSince(this.c, job, limit, since);
  }

  async repeatingKeysAll(limit: number) {
    return markers.repeatingKeysAll(this.c, limit);
  }

  async runsAfter(job: string, afterId: number, limit: number) {
    return history.runsAfter(this.c, job, afterId, limit);
  }

  async runsRunningOrFinishedSince(job: string, since: number) {
    return history.runsRunningOrFinishedSince(this.c, job, since);
  }

  async timelines(jobs: readonly string[], since: number) {
    return this.c.read(() => history.timelines(this.c, jobs, since));
  }

  async timelineChanges(
    jobs: readonly string[],
    since: number,
    afterId: number,
    ids: readonly number[],
  ) {
    return this.c.read(() => history.timelineChanges(this.c, jobs, since, afterId, ids));
  }

  async maxRunId(job: string) {
    return history.maxRunId(this.c, job);
  }

  async jobsChangedSince(runId: number, eventId: number) {
    return this.c.read(() => history.jobsChangedSince(this.c, runId, eventId));
  }

  async maxIds() {
    return history.maxIds(this.c);
  }

  async jobsAttemptedSince(since: number) {
    return markers.jobsAttemptedSince(this.c, since);
  }

  async dataVersion() {
    return this.c.raw.pragma("data_version", { simple: true }) as number;
  }

  async jobGauges() {
    return jobs.jobGauges(this.c);
  }
}

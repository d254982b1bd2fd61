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
  Prune,
  ReserveOutcome,
  ReserveRequest,
  RunEnd,
  RunProcess,
  Riders,
  SlotRecord,
  TickWrite,
} from "./rows.js";
import type { RunResult } from "../core/types.js";
import * as daemon from "./postgres/daemon.js";
import * as events from "./postgres/events.js";
import * as jobs from "./postgres/jobs.js";
import * as reconcile from "./postgres/reconcile.js";
import * as runs from "./postgres/runs.js";
import * as tick from "./postgres/tick.js";
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

  async setJobHashes(hashes: ReadonlyMap<string, string>) {
    await this.c.write((q) => daemon.setJobHashes(q, this.c.node, hashes));
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

  async ensureJob(name: string, now: number) {
    return this.c.write((q) => jobs.ensureJob(q, name, now));
  }

  async addJobs(list: readonly AddJob[], now: number) {
    return this.c.write((q) => jobs.addJobs(q, list, now));
  }

  async setPaused(name: string, paused: boolean, now: number) {
    await this.c.write((q) => jobs.setPaused(q, name, paused, now));
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

  async reserveRuns(items: readonly TickWrite[], riders?: Riders) {
    const procs = riders?.procs ?? [];
    const seen = new Set<number>();
    const ends = (riders?.ends ?? []).filter((e) => !seen.has(e.runId) && seen.add(e.runId));
    if (items.length === 0 && procs.length === 0 && ends.length === 0) return [];
    const ids = ends.map((e) => e.runId);
    const tails = ends.length > 0 ? await this.logs.tails(this.c.one, ids, this.c.node) : [];
    // Pids alone (no tick came to take them): not fsync'd, as setRunProcesses.
    const out = await this.c.write(
      (q) => tick.writeTick(q, items, this.c.node, false, true, { procs, ends, tails }),
      { unsynced: items.length === 0 && ends.length === 0 },
    );
    this.logs.forget(ids);
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
    // Not fsync'd (no commit of its own to wait for: the next synced commit, often the runs'
    // ends, takes it to disk). Lost in a crash, a run is still found by its cgroup or pid file
    // (run/cgroup.ts), as when the daemon dies between a spawn and this record.
    await this.c.write(
      async (q) => {
        await runs.lockRunJobs(
          q,
          list.map((p) => p.runId),
        );
        await runs.setRunProcesses(q, list);
      },
      { unsynced: true },
    );
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

  async pruneRuns(prunes: readonly Prune[]) {
    // Nothing to delete (the common case): reads, no transaction, nothing written (a row lock
    // is a write: an fsync'd commit for nothing).
    const due: Prune[] = [];
    for (const p of prunes) if (await runs.hasPrunable(this.c.one, p.job, p.keep)) due.push(p);
    if (due.length === 0) return [];
    return this.c.write(async (q) => {
      const names = due.map((p) => p.job);
      await jobs.lockJobs(q, names);
      const logs: string[] = [];
      for (const p of due) logs.push(...(await runs.pruneRuns(q, p.job, p.keep)));
      return logs;
    });
  }

  // ---- the marker path

  async removeMarker(job: string, key: string, now: number, by: string) {
    return this.c.write((q) => reconcile.removeMarker(q, job, key, now, by));
  }

  async moveMarkers(m: Parameters<Store["moveMarkers"]>[0]) {
    return this.c.write((q) => reconcile.moveMarkers(q, m, this.c.node));
  }

  // ---- events and alert state

  async event(at: number, job: string | null, kind: string, detail: string | null) {
    await this.c.write((q) => events.insertEvent(q, at, job, kind, detail));
  }

  async setAlertState(job: string, active: string, now: number) {
    await this.c.write((q) => events.setAlertState(q, job, active, now));
  }

  // ---- health, status and the monitor
}

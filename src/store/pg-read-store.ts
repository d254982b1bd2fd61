// The PostgreSQL Store's reads (PgStore adds the writes): each one statement on the pool, or one
// snapshot (PgConn.read) where it reads several. Readers that follow new rows by id keep an
// IdHorizon: which ids are final, as the snapshots they read tell (postgres/horizon.ts).
import type { PgConn } from "./pg-connection.js";
import { PgMarkerStore } from "./pg-marker-store.js";
import type { StatusJob, SummaryParses } from "./status-rows.js";
import * as daemon from "./postgres/daemon.js";
import * as events from "./postgres/events.js";
import * as history from "./postgres/history.js";
import { IdHorizon } from "./postgres/horizon.js";
import * as jobs from "./postgres/jobs.js";
import * as markers from "./postgres/markers.js";
import * as runs from "./postgres/runs.js";
import * as status from "./postgres/status.js";
import * as why from "./postgres/why.js";

export class PgReadStore extends PgMarkerStore {
  /** The ids known final, for jobsChangedSince, timelineChanges and maxIds. */
  private readonly horizon = new IdHorizon();

  protected constructor(c: PgConn) {
    super(c);
  }

  async daemon() {
    return daemon.daemonRow(this.c.one, this.c.node);
  }

  async runningConfig() {
    return daemon.runningConfig(this.c.one, this.c.node);
  }

  async nodes() {
    return daemon.nodes(this.c.one);
  }

  async jobHashes() {
    return daemon.jobHashes(this.c.one);
  }

  async job(name: string) {
    return jobs.jobRow(this.c.one, name);
  }

  async allJobs() {
    return jobs.allJobs(this.c.one);
  }

  async pausedJobs() {
    return jobs.pausedJobs(this.c.one);
  }

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
  async holdsHeld() {
    return status.holdsHeld(this.c.one);
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

  async isMarked(job: string, key: string) {
    return markers.isMarked(this.c.one, job, key);
  }

  async claimHolder(job: string, key: string) {
    return markers.claimHolder(this.c.one, job, key);
  }

  async markers(job: string) {
    return markers.markers(this.c.one, job);
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

  async events(job: string | null, limit: number) {
    return events.events(this.c.one, job, limit);
  }

  async alertState(job: string) {
    return events.alertState(this.c.one, job);
  }

  async jobReadings(job: string, repeatLimit: number) {
    return this.c.read((q) => status.jobReadings(q, job, repeatLimit));
  }

  async statusRows(list: readonly StatusJob[], recentLimit: number, parses?: SummaryParses) {
    return this.c.read((q) => status.statusRows(q, list, recentLimit, this.c.node, parses));
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
    return history.timelineChanges(this.c.one, this.horizon, jobs, since, afterId, ids);
  }

  async maxRunId(job: string) {
    return history.maxRunId(this.c.one, job);
  }

  async jobsChangedSince(runId: number, eventId: number) {
    return history.jobsChangedSince(this.c.one, this.horizon, runId, eventId);
  }

  async maxIds() {
    return history.maxIds(this.c.one, this.horizon);
  }

  async jobsAttemptedSince(since: number) {
    return markers.jobsAttemptedSince(this.c.one, since);
  }

  /**
   * Changes when any transaction that writes starts or ends: a hash of the current snapshot
   * (xmin, xmax and the transactions in progress), read without writing anything. No counter
   * row that every writer would hold until its commit is on disk.
   */
  async dataVersion() {
    const r = await this.c.one.get<{ n: number }>(
      "SELECT hashtextextended(pg_current_snapshot()::text, 0) AS n",
    );
    return r?.n ?? 0;
  }

  async jobGauges() {
    return jobs.jobGauges(this.c.one);
  }
}

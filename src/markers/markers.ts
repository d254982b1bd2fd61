// Done-markers and fences: the library behind `mark`, `check`, `once` and `progress`, and the API
// for Node jobs (`import { Markers } from "cronvisor"`). A marker is committed (fsync'd, WAL +
// synchronous=FULL) before a call returns; a run that is no longer its job's live, unrevoked run
// (replaced, taken over, or a straggler) is refused and writes nothing.
import os from "node:os";
import { isAlive, startTimeOf } from "../core/proc.js";
import { openConn, type Conn } from "../store/connection.js";
import type { ClaimOutcome, MarkerWriter, Owner } from "../store/rows.js";
import * as sql from "../store/sqlite/markers.js";
import { BrokerPath } from "./broker-sync.js";
import { untilClaimed } from "./once.js";
import {
  UsageError,
  checkKey,
  claimResult,
  staleFence,
  targetFromEnv,
  type MarkersTarget,
  type SyncMarkerPath,
} from "./target.js";

// The errors, the key rule and the run from the environment, for importers of this module (the
// library entry, src/index.ts).
export * from "./target.js";

/** The store itself: an operator's process, or a root job of a run that has no broker. */
class LocalPath implements SyncMarkerPath {
  constructor(
    private readonly c: Conn,
    private readonly node = os.hostname(),
  ) {}

  isDone(w: MarkerWriter, key: string): boolean {
    const done = sql.isMarked(this.c, w.job, key);
    if (done && w.run) this.c.write(() => sql.countSkipped(this.c, w.run?.id ?? null));
    return done;
  }
  markDone(w: MarkerWriter, keys: readonly string[], now: number): number | null {
    return this.c.write(() => sql.markKeys(this.c, w, keys, now));
  }
  takeClaim(w: MarkerWriter, key: string, me: Owner, now: number): ClaimOutcome {
    return this.c.write(() => sql.takeClaim(this.c, w, key, me, now, isAlive, this.node));
  }
  completeClaim(w: MarkerWriter, key: string, pid: number, now: number): boolean {
    return this.c.write(() => sql.completeClaim(this.c, w, key, pid, now));
  }
  noteClaimCommand(job: string, key: string, pid: number, cmdPid: number): void {
    try {
      const start = startTimeOf(cmdPid);
      this.c.writeUnsynced(() => sql.setClaimCommand(this.c, job, key, pid, cmdPid, start));
    } catch {
      // a busy or full store: the claim is still held by this process while it lives
    }
  }
  releaseClaim(job: string, key: string, pid: number): void {
    this.c.write(() => sql.dropClaim(this.c, job, key, pid));
  }
  progress(w: MarkerWriter, message: string | null, now: number): boolean {
    return this.c.write(() => sql.progressIfLive(this.c, w, message, now));
  }
  list(job: string) {
    return sql.markers(this.c, job);
  }
  close(): void {
    this.c.close();
  }
}

export class Markers {
  private readonly me = { pid: process.pid, start: startTimeOf(process.pid) };

  private constructor(
    private readonly path: SyncMarkerPath,
    readonly target: MarkersTarget,
  ) {}

  /**
   * Open the markers of the current run (from CRONVISOR_* in the environment): through the run's
   * marker broker when it has one (a job of any user), else the store itself.
   */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, busyTimeoutMs = 5000): Markers {
    const target = targetFromEnv(env);
    if (env.CRONVISOR_BROKER && target.run)
      return new Markers(new BrokerPath(env.CRONVISOR_BROKER, env.CRONVISOR_SECRET ?? ""), target);
    return Markers.open(target, busyTimeoutMs);
  }

  /** The store of target.stateDir itself (it must be readable and writable by this process). */
  static open(target: MarkersTarget, busyTimeoutMs = 5000): Markers {
    const c = openConn(target.stateDir, { create: false, busyTimeoutMs });
    return new Markers(new LocalPath(c), target);
  }

  close(): void {
    this.path.close();
  }

  get job(): string {
    return this.target.job;
  }

  /** Is KEY done? A done key counts as skipped work on the current run. */
  isDone(key: string): boolean {
    checkKey(key);
    return this.path.isDone(this.target, key);
  }

  /** Mark keys done in one transaction; returns how many were new. Throws FenceError if stale. */
  markDone(...keys: string[]): number {
    keys.forEach(checkKey);
    const n = this.path.markDone(this.target, keys, Date.now());
    if (n === null) throw staleFence(this.target);
    return n;
  }

  /**
   * Claim KEY for this process: returns "done" if already marked, else claims it (a live claim
   * by another process throws ClaimHeldError; a dead holder's claim is taken over at once) and
   * counts the attempt.
   */
  claim(key: string): "done" | "claimed" {
    checkKey(key);
    const out = this.path.takeClaim(this.target, key, this.me, Date.now());
    return claimResult(this.target, key, out);
  }

  /** Mark a claimed key right after its side effect succeeded, and release the claim. */
  completeClaim(key: string): void {
    if (!this.path.completeClaim(this.target, key, this.me.pid, Date.now()))
      throw staleFence(this.target);
  }

  /** Record the process a claim's command runs in (see ClaimRow). Best effort. */
  noteClaimCommand(key: string, cmdPid: number): void {
    this.path.noteClaimCommand(this.target.job, key, this.me.pid, cmdPid);
  }

  releaseClaim(key: string): void {
    this.path.releaseClaim(this.target.job, key, this.me.pid);
  }

  /**
   * Run fn only if KEY is not done; mark KEY right after fn resolves (before anything else can
   * fail). Returns false if KEY was already done. A throw from fn leaves KEY unmarked.
   */
  async once(
    key: string,
    fn: () => unknown | Promise<unknown>,
    opts: { wait?: boolean } = {},
  ): Promise<boolean> {
    if ((await untilClaimed(() => this.claim(key), opts.wait ?? false)) === "done") return false;
    try {
      await fn();
    } catch (e) {
      this.releaseClaim(key);
      throw e;
    }
    this.completeClaim(key);
    return true;
  }

  /** Report progress for the current run (time, optional message; each call counts). */
  progress(message: string | null = null): void {
    if (this.target.run === null)
      throw new UsageError("progress is reported by a run: call it inside a cronvisor job");
    if (!this.path.progress(this.target, message, Date.now())) throw staleFence(this.target);
  }

  /** The job's markers (the store itself only: a run's broker does not list them). */
  list(): { key: string; run_id: number | null; created_at: number }[] {
    return this.path.list(this.target.job);
  }
}

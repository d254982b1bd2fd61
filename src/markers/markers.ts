// Done-markers and fences: the library behind `mark`, `check`, `once` and `progress`, and the API
// for Node jobs (`import { Markers } from "cronvisor"`). A marker is committed (fsync'd, WAL +
// synchronous=FULL) before a call returns; a run that is no longer its job's live, unrevoked run
// (replaced, taken over, or a straggler) is refused and writes nothing.
import { EXIT, signalExitCode } from "../core/exit.js";
import { isAlive, startTimeOf } from "../run/proc.js";
import { openConn, type Conn } from "../store/connection.js";
import { StoreError } from "../store/errors.js";
import type { ClaimOutcome, MarkerWriter } from "../store/rows.js";
import * as sql from "../store/sqlite/markers.js";

/** The writer's fence is stale: a newer run holds the job, or this run has ended. Exit 3. */
export class FenceError extends Error {
  readonly exitCode = EXIT.unknown;
}
/** Another live `once` holds this key right now. Exit 75. */
export class ClaimHeldError extends Error {
  readonly exitCode = EXIT.busy;
}
/** Bad arguments. Exit 2. */
export class UsageError extends Error {
  readonly exitCode = EXIT.usage;
}

export interface MarkersTarget extends MarkerWriter {
  stateDir: string;
}

const KEY_MAX = 1024;

export function checkKey(key: string): string {
  if (key.length === 0) throw new UsageError("a marker key must not be empty");
  if (key.length > KEY_MAX)
    throw new UsageError(`a marker key must be at most ${KEY_MAX} characters`);
  if (/[\n\r\0]/.test(key))
    throw new UsageError(`marker key ${JSON.stringify(key)} contains a newline or NUL`);
  return key;
}

/** Read the current run from the environment a job receives. */
export function targetFromEnv(env: NodeJS.ProcessEnv = process.env): MarkersTarget {
  const stateDir = env.CRONVISOR_STATE_DIR;
  const job = env.CRONVISOR_JOB;
  const id = Number(env.CRONVISOR_RUN_ID);
  const fence = Number(env.CRONVISOR_FENCE);
  if (!stateDir || !job || !Number.isInteger(id) || !Number.isInteger(fence)) {
    throw new UsageError(
      "not inside a cronvisor run (CRONVISOR_STATE_DIR, CRONVISOR_JOB, CRONVISOR_RUN_ID, CRONVISOR_FENCE unset); outside a job pass --job NAME and the config",
    );
  }
  return { stateDir, job, run: { id, fence } };
}

export class Markers {
  private readonly me = { pid: process.pid, start: startTimeOf(process.pid) };

  private constructor(
    private readonly c: Conn,
    readonly target: MarkersTarget,
  ) {}

  /** Open the markers of the current run (from CRONVISOR_* in the environment). */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, busyTimeoutMs = 5000): Markers {
    return Markers.open(targetFromEnv(env), busyTimeoutMs);
  }

  static open(target: MarkersTarget, busyTimeoutMs = 5000): Markers {
    return new Markers(openConn(target.stateDir, { create: false, busyTimeoutMs }), target);
  }

  close(): void {
    this.c.close();
  }

  get job(): string {
    return this.target.job;
  }

  /** Is KEY done? A done key counts as skipped work on the current run. */
  isDone(key: string): boolean {
    checkKey(key);
    const done = sql.isMarked(this.c, this.target.job, key);
    if (done && this.target.run) this.c.write(() => sql.countSkipped(this.c, this.runId()));
    return done;
  }

  /** Mark keys done in one transaction; returns how many were new. Throws FenceError if stale. */
  markDone(...keys: string[]): number {
    keys.forEach(checkKey);
    const now = Date.now();
    const n = this.c.write(() => sql.markKeys(this.c, this.target, keys, now));
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
    const now = Date.now();
    const out = this.c.write(() => sql.takeClaim(this.c, this.target, key, this.me, now, isAlive));
    return claimResult(this.target, key, out);
  }

  /** Mark a claimed key right after its side effect succeeded, and release the claim. */
  completeClaim(key: string): void {
    const now = Date.now();
    const ok = this.c.write(() => sql.completeClaim(this.c, this.target, key, this.me.pid, now));
    if (!ok) throw staleFence(this.target);
  }

  /** Record the process a claim's command runs in (see ClaimRow). Best effort. */
  noteClaimCommand(key: string, cmdPid: number): void {
    try {
      const start = startTimeOf(cmdPid);
      this.c.writeUnsynced(() =>
        sql.setClaimCommand(this.c, this.target.job, key, this.me.pid, cmdPid, start),
      );
    } catch {
      // a busy or full store: the claim is still held by this process while it lives
    }
  }

  releaseClaim(key: string): void {
    this.c.write(() => sql.dropClaim(this.c, this.target.job, key, this.me.pid));
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
    const id = this.runId();
    if (id === null)
      throw new UsageError("progress is reported by a run: call it inside a cronvisor job");
    const now = Date.now();
    this.c.write(() => sql.progress(this.c, id, message, now));
  }

  list(): { key: string; run_id: number | null; created_at: number }[] {
    return sql.markers(this.c, this.target.job);
  }

  private runId(): number | null {
    return this.target.run?.id ?? null;
  }
}

export function staleFence(t: MarkerWriter): FenceError {
  const run = t.run as { id: number; fence: number };
  return new FenceError(
    `refused: run ${run.id} (fence ${run.fence}) is no longer the current run of job ${t.job}; nothing was written`,
  );
}

/** A claim's outcome as the marker path reports it: "done", "claimed", or the error to throw. */
export function claimResult(t: MarkerWriter, key: string, out: ClaimOutcome): "done" | "claimed" {
  switch (out.kind) {
    case "done":
    case "claimed":
      return out.kind;
    case "stale":
      throw staleFence(t);
    case "held": {
      const h = out.holder;
      const run = `run ${h.run_id ?? "-"}`;
      throw new ClaimHeldError(
        out.by === "once"
          ? `key ${JSON.stringify(key)} is being worked on by pid ${h.pid} (${run})`
          : `key ${JSON.stringify(key)} is being worked on by pid ${h.cmd_pid}, whose \`once\` (pid ${h.pid}, ${run}) has died`,
      );
    }
  }
}

/** Take a claim; with `wait`, try again every 100 ms while another live process holds it. */
export async function untilClaimed(
  take: () => "done" | "claimed" | Promise<"done" | "claimed">,
  wait: boolean,
): Promise<"done" | "claimed"> {
  for (;;) {
    try {
      return await take();
    } catch (e) {
      if (!(e instanceof ClaimHeldError) || !wait) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Run argv with the terminal's stdio; resolves to its exit code (128+N when killed by signal N). */
export async function runCommand(
  argv: string[],
  onSpawn: (pid: number) => void = () => {},
): Promise<number> {
  // Loaded here, not at the top: `mark KEY` pays for Node's start-up only (see BENCHMARKS.md).
  const { spawn } = await import("node:child_process");
  return new Promise((resolve) => {
    const [cmd, ...args] = argv;
    const child = spawn(cmd as string, args, { stdio: "inherit" });
    if (child.pid !== undefined) onSpawn(child.pid);
    child.on("error", (e) => {
      process.stderr.write(`cronvisor: cannot run ${cmd}: ${e.message}\n`);
      resolve((e as NodeJS.ErrnoException).code === "ENOENT" ? EXIT.notFound : EXIT.cannotExecute);
    });
    child.on("exit", (code, signal) => {
      if (code !== null) resolve(code);
      else resolve(signalExitCode(signal ?? ""));
    });
  });
}

export function isBusy(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? "";
  return code.startsWith("SQLITE_BUSY") || (e instanceof StoreError && e.code === "busy");
}

// Done-markers and fences: the library behind `mark`, `check`, `once` and `progress`, and the API
// for Node jobs (`import { Markers } from "cronvisor"`). A marker is committed (fsync'd, WAL +
// synchronous=FULL) before a call returns; a run that is no longer its job's live, unrevoked run
// (replaced, taken over, or a straggler) is refused and writes nothing.
import { isAlive, startTimeOf } from "../run/proc.js";
import { Store, StoreError } from "../store/store.js";

/** The writer's fence is stale: a newer run holds the job, or this run has ended. Exit 3. */
export class FenceError extends Error {
  readonly exitCode = 3;
}
/** Another live `once` holds this key right now. Exit 75. */
export class ClaimHeldError extends Error {
  readonly exitCode = 75;
}
/** Bad arguments. Exit 2. */
export class UsageError extends Error {
  readonly exitCode = 2;
}

export interface MarkersTarget {
  stateDir: string;
  job: string;
  /** The run writing, with its fence; null for an operator outside any run (no fence check). */
  run: { id: number; fence: number } | null;
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
    private readonly store: Store,
    readonly target: MarkersTarget,
  ) {}

  /** Open the markers of the current run (from CRONVISOR_* in the environment). */
  static fromEnv(env: NodeJS.ProcessEnv = process.env, busyTimeoutMs = 5000): Markers {
    return Markers.open(targetFromEnv(env), busyTimeoutMs);
  }

  static open(target: MarkersTarget, busyTimeoutMs = 5000): Markers {
    return new Markers(Store.open(target.stateDir, { create: false, busyTimeoutMs }), target);
  }

  close(): void {
    this.store.close();
  }

  get job(): string {
    return this.target.job;
  }

  private runId(): number | null {
    return this.target.run?.id ?? null;
  }

  private assertFence(): void {
    const run = this.target.run;
    if (run && !this.store.fenceValid(this.target.job, run.id, run.fence)) {
      throw new FenceError(
        `refused: run ${run.id} (fence ${run.fence}) is no longer the current run of job ${this.target.job}; nothing was written`,
      );
    }
  }

  /** Is KEY done? A done key counts as skipped work on the current run. */
  isDone(key: string): boolean {
    checkKey(key);
    const done = this.store.isMarked(this.target.job, key);
    if (done && this.target.run) this.store.tx(() => this.store.countSkipped(this.runId()));
    return done;
  }

  /** Mark keys done in one transaction; returns how many were new. Throws FenceError if stale. */
  markDone(...keys: string[]): number {
    keys.forEach(checkKey);
    const now = Date.now();
    return this.store.tx(() => {
      this.assertFence();
      let n = 0;
      for (const k of keys)
        if (
          this.store.insertMarker(
            this.target.job,
            k,
            this.runId(),
            this.target.run?.fence ?? null,
            now,
          )
        )
          n++;
      return n;
    });
  }

  /**
   * Claim KEY for this process: returns "done" if already marked, else claims it (a live claim
   * by another process throws ClaimHeldError; a dead holder's claim is taken over at once) and
   * counts the attempt.
   */
  claim(key: string): "done" | "claimed" {
    checkKey(key);
    const { job } = this.target;
    const now = Date.now();
    return this.store.tx(() => {
      if (this.store.isMarked(job, key)) {
        this.store.countSkipped(this.runId());
        return "done" as const;
      }
      this.assertFence();
      const c = this.store.claim(job, key);
      if (c && c.pid !== this.me.pid) {
        const run = `run ${c.run_id ?? "-"}`;
        if (isAlive(c.pid, c.pid_start))
          throw new ClaimHeldError(
            `key ${JSON.stringify(key)} is being worked on by pid ${c.pid} (${run})`,
          );
        // The `once` process died but its command may still be at work: the claim holds.
        if (c.cmd_pid !== null && isAlive(c.cmd_pid, c.cmd_start))
          throw new ClaimHeldError(
            `key ${JSON.stringify(key)} is being worked on by pid ${c.cmd_pid}, whose \`once\` (pid ${c.pid}, ${run}) has died`,
          );
      }
      this.store.putClaim(job, key, this.me.pid, this.me.start, this.runId(), now);
      this.store.countAttempt(job, key, now);
      return "claimed" as const;
    });
  }

  /** Mark a claimed key right after its side effect succeeded, and release the claim. */
  completeClaim(key: string): void {
    const now = Date.now();
    this.store.tx(() => {
      this.assertFence();
      this.store.insertMarker(
        this.target.job,
        key,
        this.runId(),
        this.target.run?.fence ?? null,
        now,
      );
      this.store.dropClaim(this.target.job, key, this.me.pid);
    });
  }

  /** Record the process a claim's command runs in (see ClaimRow). Best effort. */
  noteClaimCommand(key: string, cmdPid: number): void {
    try {
      this.store.setClaimCommand(this.target.job, key, this.me.pid, cmdPid, startTimeOf(cmdPid));
    } catch {
      // a busy or full store: the claim is still held by this process while it lives
    }
  }

  releaseClaim(key: string): void {
    this.store.tx(() => this.store.dropClaim(this.target.job, key, this.me.pid));
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
    for (;;) {
      try {
        if (this.claim(key) === "done") return false;
        break;
      } catch (e) {
        if (!(e instanceof ClaimHeldError) || !opts.wait) throw e;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
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
    this.store.progress(id, message, Date.now());
  }

  list(): { key: string; run_id: number | null; created_at: number }[] {
    return this.store.markers(this.target.job);
  }
}

/** Run argv with the terminal's stdio; resolves to its exit code (128+N when killed by signal N). */
export async function runCommand(
  argv: string[],
  onSpawn: (pid: number) => void = () => {},
): Promise<number> {
  // Loaded here, not at the top: `mark KEY` pays for Node's start-up only (see BENCHMARKS.md).
  const [{ spawn }, os] = await Promise.all([import("node:child_process"), import("node:os")]);
  return new Promise((resolve) => {
    const [cmd, ...args] = argv;
    const child = spawn(cmd as string, args, { stdio: "inherit" });
    if (child.pid !== undefined) onSpawn(child.pid);
    child.on("error", (e) => {
      process.stderr.write(`cronvisor: cannot run ${cmd}: ${e.message}\n`);
      resolve((e as NodeJS.ErrnoException).code === "ENOENT" ? 127 : 126);
    });
    child.on("exit", (code, signal) => {
      if (code !== null) resolve(code);
      else resolve(128 + (signal ? (os.constants.signals[signal] ?? 0) : 0));
    });
  });
}

export function isBusy(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? "";
  return code.startsWith("SQLITE_BUSY") || (e instanceof StoreError && e.code === "busy");
}

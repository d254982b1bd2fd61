// All child-process handling for one run: spawn in its own process group, log the output to a
// capped file, escalate SIGTERM -> SIGKILL on timeout or terminate(), and end in exactly one
// RunResult. A run ends when its main process exits; whatever is left of its group is killed
// then, so a grandchild holding stdout open never keeps a run (or its lock) alive.
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import { formatDuration } from "../core/duration.js";
import { lookupUser } from "./env.js";
import { signalGroup, startTimeOf } from "./proc.js";
import type { RunResult, RunSpec } from "../core/types.js";

export interface RunHandle {
  /** The main process; null when spawn failed. */
  pid: number | null;
  /** == pid: the main process leads its own group (and session). */
  pgid: number | null;
  /** startTimeOf(pid) read right after spawn: with pid, the run's identity. */
  pidStart: string | null;
  /** Resolves exactly once, never rejects. */
  done: Promise<RunResult>;
  /**
   * SIGTERM to the group, SIGKILL after graceMs (default spec.killGraceMs) if the main process
   * still lives. The run ends `timeout` for reason "timeout", else `killed` with the reason as
   * given. Idempotent: the first call wins; a no-op once the main process has exited.
   */
  terminate(reason: "timeout" | "killed" | string, graceMs?: number): void;
}

/**
 * After the main process exits (and its group is killed), how long output may still drain
 * from the pipes. Only a process that left the group (setsid) can hold them open longer; we
 * stop reading then, so it cannot hang the run.
 */
const DRAIN_MS = 1000;

/** setpriv (util-linux) sets uid, gid and supplementary groups; Node's uid/gid options drop the latter. */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => fs.existsSync(p)) ?? null;

/**
 * Used when spec.exitFile is set: `sh -c EXIT_WRAPPER cronvisor-run EXITFILE ARGV...` runs the
 * job and writes its exit status to EXITFILE, so a daemon restarted while the job runs (which
 * cannot wait() for a process it did not start) still learns how it ended.
 * - The job runs in the foreground: a trapped signal then waits until the job has ended, so
 *   the wrapper outlives the job without a wait loop. Signals go to the whole group, so the job
 *   gets its own SIGTERM (once; nothing is forwarded) and keeps its kill_grace for cleanup.
 * - `trap :` (not `trap ''`): an ignored signal would be inherited by the job; a trapped one
 *   is reset to the default in it.
 * - The shell's own stderr goes to /dev/null so its "Killed" notices stay out of the job's log;
 *   the job gets the real stderr back (fd 3) in a subshell, where the redirection lives.
 * - A job killed by signal N shows as 128+N here (sh cannot tell that from `exit 128+N`).
 */
const EXIT_WRAPPER =
  'f=$1; shift; trap : HUP INT QUIT TERM; exec 3>&2 2>/dev/null; (exec "$@" 2>&3 3>&-); rc=$?; echo "$rc" > "$f"; exit "$rc"';

/** A run that cannot start: the code (ENOENT, EACCES, ...) goes first in the reason. */
class SpawnError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function startRun(spec: RunSpec): RunHandle {
  const startedAt = Date.now();
  const where = `(job: ${spec.job}, run: ${spec.runId})`;
  let log: CappedLog | null = null;
  let resolveDone!: (r: RunResult) => void;
  const done = new Promise<RunResult>((resolve) => (resolveDone = resolve));
  let settled = false;
  const settle = (r: Omit<RunResult, "startedAt" | "finishedAt" | "durationMs">) => {
    if (settled) return;
    settled = true;
    const finishedAt = Date.now();
    resolveDone({ ...r, startedAt, finishedAt, durationMs: finishedAt - startedAt });
  };
  const spawnFailed = (e: unknown) => {
    const err = e as NodeJS.ErrnoException;
    const reason = `spawn failed: ${err.code ?? "ERROR"} ${err.message} ${where}`;
    // Say it in the log too: `cronvisor logs` is where an operator looks first.
    const bytes = log?.finish(`[cronvisor: ${reason}]\n`) ?? { bytes: 0, truncated: false };
    settle({
      status: "spawn_failed",
      reason,
      exitCode: null,
      signal: null,
      logBytes: bytes.bytes,
      logTruncated: bytes.truncated,
    });
  };
  const failedHandle = (e: unknown): RunHandle => {
    spawnFailed(e);
    return { pid: null, pgid: null, pidStart: null, done, terminate: () => {} };
  };

  let child: ChildProcess;
  try {
    log = new CappedLog(spec.logPath, spec.logMaxBytes);
    const argv = commandLine(spec);
    child = spawn(argv[0] as string, argv.slice(1), {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ["ignore", "pipe", "pipe"], // "ignore" is /dev/null
      detached: true, // setsid(): the child leads a new process group we can signal as one
    });
  } catch (e) {
    return failedHandle(e);
  }
  // Node reports ENOENT/EACCES/EMFILE from spawn as an 'error' event on the next tick.
  child.on("error", (e) => {
    if (child.pid === undefined) {
      for (const s of [child.stdout, child.stderr]) s?.destroy();
      spawnFailed(e);
    }
  });
  const pid = child.pid ?? null;
  if (pid === null) return { pid: null, pgid: null, pidStart: null, done, terminate: () => {} };
  const pidStart = startTimeOf(pid);
  const out = log;

  // ---- output: both pipes into the log, in the order chunks arrive -------------------------
  const streams = [child.stdout, child.stderr].filter((s): s is Readable => s !== null);
  let echoPaused = false;
  let echoBackpressure = spec.echo !== undefined;
  const onData = (chunk: Buffer) => {
    out.write(chunk);
    if (!spec.echo) return;
    try {
      // Respect a slow reader of `cronvisor run` instead of queueing its output in memory.
      if (!spec.echo.write(chunk) && echoBackpressure && !echoPaused) {
        echoPaused = true;
        for (const s of streams) s.pause();
        spec.echo.once("drain", () => {
          echoPaused = false;
          for (const s of streams) s.resume();
        });
      }
    } catch {
      // a closed terminal must not end the run; the log still gets everything
    }
  };
  const closed = streams.map(
    (s) =>
      new Promise<void>((resolve) => {
        s.on("data", onData);
        s.on("error", () => {}); // a destroyed pipe; 'close' follows
        s.on("close", resolve);
      }),
  );

  // ---- termination: SIGTERM the group, SIGKILL after the grace ------------------------------
  let exited = false;
  let ending: { status: "timeout" | "killed"; reason: string } | null = null;
  let killTimer: NodeJS.Timeout | undefined;
  const terminate = (reason: string, graceMs = spec.killGraceMs) => {
    if (exited || ending) return;
    ending =
      reason === "timeout"
        ? {
            status: "timeout",
            reason:
              spec.timeoutMs === null
                ? "timeout"
                : `timeout after ${formatDuration(spec.timeoutMs)}`,
          }
        : { status: "killed", reason };
    // Until 'exit' is emitted, Node has not reaped pid, so the group id cannot have been reused.
    signalGroup(pid, "SIGTERM");
    signalGroup(pid, "SIGCONT"); // a stopped (SIGSTOP) member acts on SIGTERM only once continued
    killTimer = setTimeout(() => {
      if (!exited) signalGroup(pid, "SIGKILL");
    }, graceMs);
  };
  const timeoutTimer =
    spec.timeoutMs === null ? undefined : setTimeout(() => terminate("timeout"), spec.timeoutMs);

  // ---- the end: the main process exits ------------------------------------------------------
  child.on("exit", (code, signal) => {
    exited = true;
    clearTimeout(timeoutTimer);
    clearTimeout(killTimer);
    // The run is over: leftover members of its group are killed, never waited on.
    signalGroup(pid, "SIGKILL");
    // Output still in the pipes is read; stop honouring a slow echo reader so it drains.
    echoBackpressure = false;
    if (echoPaused) for (const s of streams) s.resume();
    const drain = setTimeout(() => {
      for (const s of streams) s.destroy();
    }, DRAIN_MS);
    void Promise.all(closed).then(() => {
      clearTimeout(drain);
      const bytes = out.finish(); // never throws: `done` must resolve whatever the disk does
      const base = { exitCode: code, signal, logBytes: bytes.bytes, logTruncated: bytes.truncated };
      if (ending) settle({ ...base, status: ending.status, reason: ending.reason });
      else if (code === 0) settle({ ...base, status: "ok", reason: null });
      else if (code !== null) settle({ ...base, status: "failed", reason: `exit ${code}` });
      else settle({ ...base, status: "failed", reason: `signal ${signal}` });
    });
  });

  return { pid, pgid: pid, pidStart, done, terminate };
}

/**
 * The argv to spawn, after checks that turn the usual mistakes into a clear reason: a missing
 * cwd (Node would report ENOENT for the program), a missing or non-executable program (with a
 * wrapper around it, it would be exit 127 in the log instead), an unknown user.
 */
function commandLine(spec: RunSpec): string[] {
  const cwd = statOrNull(spec.cwd);
  if (!cwd) throw new SpawnError("ENOENT", `cwd ${spec.cwd} does not exist`);
  if (!cwd.isDirectory()) throw new SpawnError("ENOTDIR", `cwd ${spec.cwd} is not a directory`);
  let argv =
    typeof spec.command === "string" ? [spec.shell, "-c", spec.command] : [...spec.command];
  if (argv.length === 0) throw new SpawnError("EINVAL", "empty command");
  checkExecutable(argv[0] as string, spec.env.PATH ?? "", spec.cwd);
  if (spec.user !== null) {
    const user = lookupUser(spec.user);
    if (!user) throw new SpawnError("ENOENT", `no such user: ${spec.user}`);
    if (process.getuid?.() !== 0 && process.getuid?.() !== user.uid) {
      throw new SpawnError("EPERM", `running as ${spec.user} needs root`);
    }
    if (!SETPRIV) throw new SpawnError("ENOENT", "setpriv (util-linux) not found: needed for user");
    argv = [SETPRIV, `--reuid=${user.uid}`, `--regid=${user.gid}`, "--init-groups", "--", ...argv];
  }
  if (spec.exitFile) {
    // The wrapper runs as the daemon's user (outside setpriv), so it can write the state dir.
    ensureDir(path.dirname(spec.exitFile));
    // A stale status must never be read for this run. Run ids are fresh, so there rarely is
    // one: look first (existsSync does not throw; a failed unlink's exception cost 4% of the
    // daemon's CPU at 50 runs a second).
    if (fs.existsSync(spec.exitFile)) fs.unlinkSync(spec.exitFile);
    argv = ["/bin/sh", "-c", EXIT_WRAPPER, "cronvisor-run", spec.exitFile, ...argv];
  }
  return argv;
}

/**
 * Directories this process has made (or found) already: mkdir on every run start was a tenth of
 * the daemon's per-run CPU. A directory removed behind its back is made again when opening a
 * file in it fails (see openIn).
 */
const madeDirs = new Set<string>();

function ensureDir(dir: string): void {
  if (madeDirs.has(dir)) return;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  madeDirs.add(dir);
}

/** openSync in a directory ensureDir made, making it again if it has gone since. */
function openIn(file: string, flags: string, mode: number): number {
  ensureDir(path.dirname(file));
  try {
    return fs.openSync(file, flags, mode);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    madeDirs.delete(path.dirname(file));
    ensureDir(path.dirname(file));
    return fs.openSync(file, flags, mode);
  }
}

/** execvp(3)'s view of `program`: found via PATH (from the job's env) unless it has a slash. */
function checkExecutable(program: string, searchPath: string, cwd: string): void {
  const candidates = program.includes("/")
    ? [path.resolve(cwd, program)]
    : searchPath
        .split(":")
        .filter((dir) => dir !== "")
        .map((dir) => path.resolve(cwd, dir, program));
  let denied: string | null = null;
  for (const file of candidates) {
    const st = statOrNull(file);
    if (!st) continue;
    try {
      if (!st.isFile()) throw new Error("not a file");
      fs.accessSync(file, fs.constants.X_OK);
      return;
    } catch {
      denied ??= file;
    }
  }
  if (denied) throw new SpawnError("EACCES", `${denied} is not executable`);
  throw new SpawnError(
    "ENOENT",
    program.includes("/") ? `${program} does not exist` : `command not found: ${program}`,
  );
}

function statOrNull(file: string): fs.Stats | null {
  try {
    // No exception for a missing file: a PATH search misses in most directories.
    return fs.statSync(file, { throwIfNoEntry: false }) ?? null;
  } catch {
    return null;
  }
}

/**
 * The run's log, at most `maxBytes` (+ one marker line) on disk and never more than one chunk
 * in memory. The first half of the cap goes straight into the log file; after that the output
 * goes round a ring file of the other half (`LOG.tail`), so it always holds the latest bytes.
 * finish() appends the marker and the ring, oldest byte first, and removes the ring.
 */
class CappedLog {
  private readonly fd: number;
  private readonly headMax: number;
  private readonly ringMax: number;
  private readonly ringPath: string;
  private ringFd: number | null = null;
  private head = 0;
  /** Bytes that went to the ring so far; the ring holds the last min(this, ringMax) of them. */
  private ringBytes = 0;
  /** Everything the job wrote, kept or not. */
  private total = 0;
  private error: NodeJS.ErrnoException | null = null;
  private finished: { bytes: number; truncated: boolean } | null = null;

  constructor(
    readonly file: string,
    maxBytes: number,
  ) {
    this.fd = openIn(file, "w", 0o600);
    fs.fchmodSync(this.fd, 0o600); // the mode only applies to a new file; a log may hold secrets
    this.headMax = Math.max(0, Math.floor(maxBytes / 2));
    this.ringMax = Math.max(0, Math.floor(maxBytes) - this.headMax);
    this.ringPath = `${file}.tail`;
  }

  /** Synchronous: a chunk is on disk (page cache) before the next one is read from the pipe. */
  write(chunk: Buffer): void {
    this.total += chunk.length;
    // After a failed write (a full disk) keep reading the pipe, so the job is not blocked.
    if (this.error) return;
    try {
      const toHead = Math.min(chunk.length, this.headMax - this.head);
      if (toHead > 0) fs.writeSync(this.fd, chunk, 0, toHead);
      this.head += toHead;
      if (toHead < chunk.length) this.toRing(chunk.subarray(toHead));
    } catch (e) {
      this.error = e as NodeJS.ErrnoException;
    }
  }

  private toRing(data: Buffer): void {
    const total = this.ringBytes + data.length;
    this.ringBytes = total;
    if (this.ringMax === 0) return;
    this.ringFd ??= fs.openSync(this.ringPath, "w+", 0o600);
    const keep = data.subarray(Math.max(0, data.length - this.ringMax));
    let pos = (total - keep.length) % this.ringMax;
    let off = 0;
    while (off < keep.length) {
      const n = Math.min(keep.length - off, this.ringMax - pos);
      fs.writeSync(this.ringFd, keep, off, n, pos);
      off += n;
      pos = (pos + n) % this.ringMax;
    }
  }

  /** Assemble and close; idempotent. `note` is appended after the output (spawn failures). */
  finish(note?: string): { bytes: number; truncated: boolean } {
    if (this.finished) return this.finished;
    const kept = Math.min(this.ringBytes, this.ringMax);
    const cut = this.total - this.head - kept;
    try {
      if (this.error) throw this.error;
      if (cut > 0) fs.writeSync(this.fd, `\n[cronvisor: ${cut} bytes cut]\n`);
      if (this.ringMax > 0 && this.ringBytes > this.ringMax) {
        // The ring has wrapped: its oldest byte sits right after the newest one.
        const start = this.ringBytes % this.ringMax;
        this.copyRing(start, this.ringMax - start);
        this.copyRing(0, start);
      } else if (kept > 0) {
        this.copyRing(0, kept);
      }
      if (note) fs.writeSync(this.fd, note);
    } catch (e) {
      this.error ??= e as NodeJS.ErrnoException;
      try {
        fs.writeSync(
          this.fd,
          `\n[cronvisor: log write failed: ${this.error.code ?? this.error.message}]\n`,
        );
      } catch {
        // the disk is still full: the run's record says the log is truncated
      }
    }
    for (const close of [
      () => this.ringFd !== null && fs.closeSync(this.ringFd),
      () => this.ringFd !== null && fs.unlinkSync(this.ringPath),
      () => fs.closeSync(this.fd),
    ]) {
      try {
        close();
      } catch {
        // nothing more to do about it; the result below is still true
      }
    }
    this.finished = { bytes: this.total, truncated: cut > 0 || this.error !== null };
    return this.finished;
  }

  private copyRing(from: number, length: number): void {
    const buf = Buffer.allocUnsafe(Math.min(length, 64 * 1024));
    for (let done = 0; done < length;) {
      const n = fs.readSync(
        this.ringFd as number,
        buf,
        0,
        Math.min(buf.length, length - done),
        from + done,
      );
      if (n === 0) break;
      fs.writeSync(this.fd, buf, 0, n);
      done += n;
    }
  }
}

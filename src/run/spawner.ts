// The daemon's side of the spawner (spawner.c, built next to this module by `npm run build`):
// one small process that forks the daemon's runs, relays their output, waits for them and
// writes each one's exit file, also after the daemon is gone. A fork of the daemon itself copied
// its whole heap's page tables in the thread that runs the loop, for every run, and each run had
// a /bin/sh wrapper of its own to write the exit file; see ARCHITECTURE.md, "The spawner".
import { spawn, type ChildProcess } from "node:child_process";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { isAlive, jobCgroupName } from "../core/proc.js";
import type { RunSpec } from "../core/types.js";

/** The built spawner: every run starts through it (`npm run build` compiles it; it needs cc). */
export const SPAWNER_PATH = fileURLToPath(new URL("./cronvisor-spawner", import.meta.url));

/** A run as the spawner starts it: the spec's own fields (core/types.ts RunSpec), and these. */
export interface SpawnRequest extends Pick<
  RunSpec,
  | "runId"
  | "job"
  | "cwd"
  | "exitFile"
  | "pidFile"
  | "leftovers"
  | "nofile"
  | "memory"
  | "cpu"
  | "tasks"
  | "ownCgroup"
> {
  /** The nice the run starts at (the spawner's child sets it before exec). */
  nice: number;
  argv: string[];
  env: Readonly<Record<string, string>>;
  /** What the run reads on fd 4 (a `user:` run's environment, command.ts); null: nothing. */
  script: string | null;
}

/** What the spawner measured of a run once nothing of it was left ('X'). */
export interface RunAccount {
  /** Processes left when the main process exited: killed, waited for or kept; null: not counted. */
  left: number | null;
  /** User + system CPU seconds of all its processes (its cgroup's; else the main process's). */
  cpuS: number;
  /** Peak memory in bytes (the cgroup's memory.peak; else the largest process's peak RSS). */
  memoryPeakBytes: number;
  /** The cgroup's OOM kills; null where no memory controller counts them. */
  oomKills: number | null;
}

/** What a run hears from the spawner, each called synchronously as its frame is read. */
export interface RunEvents {
  started(pid: number, pidStart: string | null): void;
  /** The run never started: errno's code (ENOENT, EACCES, ...) or why the spawner failed. */
  failed(code: string, message: string): void;
  output(chunk: Buffer): void;
  /** The run is over: its main process ended, its exit file is written, nothing of it is left. */
  exited(code: number | null, signal: NodeJS.Signals | null, account: RunAccount): void;
  /** No more output will come. */
  closed(): void;
  /** The spawner itself died: nothing more will come for this run. */
  lost(): void;
}

/** number -> name, the first of its aliases (SIGABRT, not SIGIOT; EAGAIN, not EWOULDBLOCK), as Node says it. */
function names<T extends string>(table: Record<string, number>): Map<number, T> {
  const m = new Map<number, T>();
  for (const [name, n] of Object.entries(table)) if (!m.has(n)) m.set(n, name as T);
  return m;
}
const SIGNAL_NAMES = names<NodeJS.Signals>(os.constants.signals);
const ERRNO_NAMES = names<string>(os.constants.errno);

/** A raw wait(2) status as Node reports a child's end: (code, null) or (null, signal). */
export function decodeStatus(status: number): {
  code: number | null;
  signal: NodeJS.Signals | null;
} {
  const sig = status & 0x7f;
  if (sig === 0) return { code: (status >> 8) & 0xff, signal: null };
  return { code: null, signal: SIGNAL_NAMES.get(sig) ?? null };
}

/**
 * A request frame: u32 length, 'S', NUL-terminated fields, then the fd 4 script (pure).
 * `keepJobCgroup`: the run goes into its job's kept cgroup (a daemon's runs; one without limits,
 * which a kept cgroup would carry over, nor `ownCgroup`), else into one of its own.
 */
export function encodeRequest(r: SpawnRequest, keepJobCgroup = false): Buffer {
  const limited = (r.memory ?? 0) > 0 || (r.cpu ?? 0) > 0 || (r.tasks ?? 0) > 0;
  const fields = [
    String(r.runId),
    String(r.nice),
    r.cwd,
    r.exitFile,
    r.pidFile,
    r.leftovers === "wait" ? "w" : r.leftovers === "keep" ? "p" : "k",
    String(r.nofile ?? 0),
    String(r.memory ?? 0),
    String(Math.round(r.cpu ?? 0)),
    String(r.tasks ?? 0),
    keepJobCgroup && !limited && r.ownCgroup !== true ? jobCgroupName(r.job) : "",
    String(r.argv.length),
    ...r.argv,
  ];
  const env = Object.entries(r.env);
  fields.push(String(env.length));
  for (const [k, v] of env) fields.push(`${k}=${v}`);
  for (const f of fields)
    if (f.includes("\0")) throw new Error("a NUL byte in a command, its environment or its cwd");
  return frameOf(`S${fields.join("\0")}\0${r.script ?? ""}`);
}

/** A frame to the spawner: u32 length, then the body (its kind's letter first). */
function frameOf(body: string): Buffer {
  const len = Buffer.byteLength(body);
  const buf = Buffer.allocUnsafe(4 + len);
  buf.writeUInt32LE(len, 0);
  buf.write(body, 4);
  return buf;
}

export class Spawner {
  private child: ChildProcess | null = null;
  /**
   * Each run asked for, by id, with the spawner that has it; `forked`: its process, from the
   * fork until its exec is confirmed (`started`) or refused.
   */
  private readonly runs = new Map<
    string,
    { events: RunEvents; by: ChildProcess; forked?: { pid: number; start: string | null } }
  >();

  /**
   * `drainMs`: how long a run's output may still come after its end; `cgroupBase`: the directory
   * of the runs' cgroups (run/cgroup.ts), or null for process groups; `keepJobCgroups`: a
   * daemon's, whose jobs run again and again (`cronvisor run`'s one run gets a cgroup of its own).
   */
  constructor(
    private readonly drainMs: number,
    private readonly cgroupBase: string | null,
    private readonly keepJobCgroups = false,
  ) {}

  /** Output no faster than a slow reader takes it (`cronvisor run`'s terminal): stop reading. */
  pauseOutput(): void {
    this.child?.stdout?.pause();
  }

  resumeOutput(): void {
    this.child?.stdout?.resume();
  }

  /** Ask for a run; its events follow, `started` or `failed` first. Never throws. */
  start(req: SpawnRequest, events: RunEvents): void {
    let frame: Buffer;
    try {
      frame = encodeRequest(req, this.keepJobCgroups);
    } catch (e) {
      events.failed("EINVAL", (e as Error).message);
      return;
    }
    const child = this.process();
    if (!child?.stdin) {
      // Said once the spawn's own 'error' (EMFILE, ENOENT, ...) has told why (it comes on the
      // next tick): a run that cannot start is a spawn failure with its code, never a throw.
      setImmediate(() => {
        const code = this.startError ?? "ENOENT";
        events.failed(code, `${code}: the spawner could not be started (${SPAWNER_PATH})`);
      });
      return;
    }
    this.runs.set(String(req.runId), { events, by: child });
    this.hold(child, +1);
    child.stdin.write(frame);
  }

  /**
   * cgroup.kill was written to a job's kept cgroup (`job-NAME`): the spawner makes the job a
   * fresh one, never cloning a child into the killed one (spawner.c, pool_killed).
   */
  jobCgroupKilled(name: string): void {
    this.child?.stdin?.write(frameOf(`D${name}\0`));
  }

  /**
   * A pruned log, renamed to `spare` next to the exit files (spare.ts, recycleLog): the spawner
   * keeps it for a later exit file if no one holds it open, else removes it. False when there is
   * no spawner to take it (the caller removes it).
   */
  recycle(spare: string): boolean {
    if (!this.child?.stdin?.writable) return false;
    this.child.stdin.write(frameOf(`R${spare}\0`));
    return true;
  }

  /** The daemon stops: the spawner exits once the runs it still waits for have ended. */
  close(): void {
    const child = this.child;
    this.child = null;
    child?.stdin?.end();
    if (child) this.hold(child, 0);
  }

  /**
   * A process waits for its runs' ends (`cronvisor run` has nothing else that keeps it alive),
   * but never for the spawner itself: its pipe counts for the event loop only while a run of this
   * spawner is under way, and not after close() (a stopping daemon leaves the rest to adoption).
   */
  private hold(child: ChildProcess, change: number): void {
    const n = (this.underWay.get(child) ?? 0) + change;
    this.underWay.set(child, n);
    const out = child.stdout as unknown as { ref?: () => void; unref?: () => void } | null;
    if (n > 0 && this.child === child) out?.ref?.();
    else out?.unref?.();
  }

  /** Why the spawner could not be started the last time it was tried. */
  private startError: string | null = null;

  /** How many runs each spawner has under way (started, not yet closed or failed). */
  private readonly underWay = new WeakMap<ChildProcess, number>();

  private process(): ChildProcess | null {
    if (this.child) return this.child;
    let child: ChildProcess;
    try {
      child = spawn(SPAWNER_PATH, [String(this.drainMs), this.cgroupBase ?? ""], {
        stdio: ["pipe", "pipe", "inherit"],
        // Its own session: a signal to the daemon's terminal or group leaves the runs' waiter be.
        detached: true,
        env: {},
      });
    } catch {
      return null;
    }
    if (child.pid === undefined) {
      child.on("error", (e: NodeJS.ErrnoException) => (this.startError = e.code ?? "ERROR"));
      return null;
    }
    this.startError = null;
    this.child = child;
    // This spawner's frames only: one killed in the middle of a frame must not leave its half
    // in front of the next spawner's.
    const reader = { input: Buffer.alloc(0) };
    const lose = () => {
      if (this.child === child) this.child = null;
      for (const [id, r] of this.runs) {
        if (r.by !== child) continue;
        this.runs.delete(id);
        // Forked and never told started (the spawner forks a tick's runs without waiting for
        // each exec): the run is recorded as a start that failed, so its process must not go on
        // unwatched, holding nothing. Killed only while it is surely that process (pid and start
        // time; without a start time it is left alone rather than risk another's pid).
        if (r.forked?.start != null && isAlive(r.forked.pid, r.forked.start)) {
          for (const target of [-r.forked.pid, r.forked.pid]) {
            try {
              process.kill(target, "SIGKILL");
            } catch {
              // no such group yet (killed before its setsid), or gone
            }
          }
        }
        r.events.lost();
      }
    };
    child.on("error", lose);
    // 'close', not 'exit': the frames still in its stdout (ends, output) are read first.
    child.on("close", lose);
    child.stdin?.on("error", () => {}); // a dead spawner: its 'exit' tells the story
    child.stdout?.on("data", (chunk: Buffer) => this.read(reader, chunk));
    // The daemon's event loop may end while its spawner still waits for runs.
    child.unref();
    (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return child;
  }

  private read(reader: { input: Buffer }, chunk: Buffer): void {
    let input = reader.input.length === 0 ? chunk : Buffer.concat([reader.input, chunk]);
    let off = 0;
    while (input.length - off >= 4) {
      const len = input.readUInt32LE(off);
      if (input.length - off - 4 < len) break;
      this.frame(input.subarray(off + 4, off + 4 + len));
      off += 4 + len;
    }
    input = off === input.length ? Buffer.alloc(0) : input.subarray(off);
    reader.input = input;
  }

  private frame(f: Buffer): void {
    const type = String.fromCharCode(f[0] as number);
    let at = 1;
    const field = (): string => {
      const end = f.indexOf(0, at);
      const s = f.toString("latin1", at, end);
      at = end + 1;
      return s;
    };
    const id = field();
    const entry = this.runs.get(id);
    if (!entry) return;
    const run = entry.events;
    switch (type) {
      case "K": {
        const pid = Number(field());
        const st = field();
        entry.forked = { pid, start: st === "" ? null : st };
        break;
      }
      case "P": {
        const pid = Number(field());
        const st = field();
        delete entry.forked;
        run.started(pid, st === "" ? null : st);
        break;
      }
      case "F": {
        this.runs.delete(id);
        this.hold(entry.by, -1);
        const code = ERRNO_NAMES.get(Number(field())) ?? "ERROR";
        run.failed(code, `${code} (the spawner's fork or exec)`);
        break;
      }
      case "O":
        at += 2; // the stream ('1' or '2') and its NUL: both go to the one log
        run.output(f.subarray(at)); // written to the log at once (log.ts): no copy needed

        break;
      case "X": {
        const { code, signal } = decodeStatus(Number(field()));
        const left = Number(field());
        const cpuUs = Number(field());
        const peak = Number(field());
        const oom = Number(field());
        run.exited(code, signal, {
          left: left < 0 ? null : left,
          cpuS: cpuUs / 1e6,
          memoryPeakBytes: peak,
          oomKills: oom < 0 ? null : oom,
        });
        break;
      }
      case "C":
        this.runs.delete(id);
        this.hold(entry.by, -1);
        run.closed();
        break;
    }
  }
}

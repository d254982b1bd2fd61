// The marker broker, main-thread side: where its socket lives, and the handle the supervising
// process (the daemon, or `cronvisor run`) uses to register each run before spawning it. The
// server itself runs in a worker thread (broker-worker.ts) with its own store connection, so a
// mark's fsync never sits on the scheduler's loop. See README "Markers in jobs that run as other
// users" and DESIGN.md "Markers are durable and fenced".
import { createHash, createHmac, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { secretHash, type Registered } from "./broker-server.js";
import type { FromWorker, ToWorker } from "./broker-worker.js";
import type { RunBroker } from "../core/types.js";
import type { StoreTarget } from "../store/store.js";
import { READ_NOFOLLOW, WRITE_NEW } from "../core/safe-path.js";

/** A Unix socket's path must fit sun_path (108 bytes with its NUL). */
const SUN_PATH_MAX = 107;
/** As root, broker sockets live under here, one directory per state dir. */
export const RUN_DIR = "/run/cronvisor";

/** The broker cannot start here: a path too long, or a directory others could tamper with. */
export class BrokerError extends Error {}

/**
 * Where the socket of a state dir's broker goes (pure). Never the state dir itself, which stays
 * 0700: as root, a directory of its own that a job's user can traverse but not list; otherwise
 * jobs run as the daemon's own user, who can reach `<state dir>/broker/`.
 */
export function socketDir(stateDir: string, uid: number): string {
  if (uid !== 0) return path.join(stateDir, "broker");
  const id = createHash("sha256").update(stateDir).digest("hex").slice(0, 16);
  return path.join(RUN_DIR, id);
}

/** The socket's path, refused when it does not fit a Unix socket address. */
export function socketPath(dir: string, name: string): string {
  const p = path.join(dir, name);
  const bytes = Buffer.byteLength(p);
  if (bytes > SUN_PATH_MAX)
    throw new BrokerError(
      `the marker broker's socket ${p} is ${bytes} bytes, over the ${SUN_PATH_MAX} a Unix socket allows: use a shorter state_dir`,
    );
  return p;
}

/**
 * Create (or reuse) the socket's directory and check it with lstat: a real directory, owned by
 * us, not writable by others. As root every ancestor is checked too (root's, not writable by
 * others unless sticky): a directory another user could replace would let them stand in for the
 * broker and read every run's secret.
 */
export function prepareSocketDir(dir: string, uid: number): void {
  const mode = uid === 0 ? 0o711 : 0o700; // traversable by a job's user, never listable
  const chain = uid === 0 ? ancestors(dir) : [dir];
  for (const at of chain) {
    let st = fs.lstatSync(at, { throwIfNoEntry: false });
    if (!st) {
      fs.mkdirSync(at, { mode });
      fs.chmodSync(at, mode); // the umask must not decide who may traverse it
      st = fs.lstatSync(at);
    }
    const why = dirProblem(st, uid, at === dir || at === RUN_DIR);
    if (why !== null)
      throw new BrokerError(
        `refusing to put the marker broker's socket under ${at}: it ${why}; it must be a directory owned by ${uid === 0 ? "root" : "the daemon's user"} that others cannot write`,
      );
  }
}

/** "/", "/run", ..., dir itself. */
function ancestors(dir: string): string[] {
  const out: string[] = [];
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    out.unshift(at);
    if (at === path.dirname(at)) return out;
  }
}

/** Why a directory on the broker's path is unsafe, or null (pure). `own`: one the broker keeps. */
export function dirProblem(
  st: { isDirectory(): boolean; uid: number; mode: number },
  uid: number,
  own: boolean,
): string | null {
  if (!st.isDirectory()) return "is not a directory (a symlink?)";
  if (st.uid !== uid && st.uid !== 0) return `is owned by uid ${st.uid}`;
  const othersWrite = (st.mode & 0o022) !== 0;
  if (othersWrite && (own || (st.mode & 0o1000) === 0)) return "is writable by others";
  return null;
}

/**
 * Start the broker of a state dir under `name` (`daemon.sock`, `run-PID.sock`). The caller holds
 * the state dir (the daemon's claim) or the name is its own pid's, so a socket left at that path
 * is stale and replaced. Rejects with BrokerError when the socket cannot be placed safely.
 */
export async function startBroker(
  stateDir: string,
  name: string,
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
  store: StoreTarget | null = null,
): Promise<RunBroker> {
  const uid = process.getuid?.() ?? 0;
  const dir = socketDir(stateDir, uid);
  const sock = socketPath(dir, name);
  prepareSocketDir(dir, uid);
  const key = runKey(stateDir);
  // Kept here too, so that a worker that dies (it should not) is replaced with every live run.
  const runs = new Map<number, { hash: string; run: Registered }>();
  let closing = false;
  let worker = await spawnWorker(stateDir, sock, store);
  const send = (m: ToWorker): void => worker.postMessage(m);
  const watch = (w: Worker): void => {
    w.on("exit", (code) => {
      if (closing) return;
      log(`cronvisor: the marker broker stopped (exit ${code}); starting it again`);
      void spawnWorker(stateDir, sock, store).then(
        (next) => {
          worker = next;
          watch(next);
          for (const r of runs.values()) send({ type: "register", ...r });
        },
        (e: unknown) => log(`cronvisor: the marker broker cannot restart: ${(e as Error).message}`),
      );
    });
  };
  watch(worker);
  return {
    socketPath: sock,
    register(r) {
      const secret = runSecret(key, r.runId, r.fence);
      const entry = { hash: secretHash(secret), run: { ...r, pgid: null } };
      runs.set(r.runId, entry);
      send({ type: "register", ...entry });
      return secret;
    },
    adopt(r) {
      // The run still holds the secret its own daemon derived: derive it again.
      const hash = secretHash(runSecret(key, r.runId, r.fence));
      const entry = { hash, run: { job: r.job, runId: r.runId, fence: r.fence, pgid: r.pgid } };
      runs.set(r.runId, entry);
      send({ type: "register", ...entry });
      return true;
    },
    setGroup(runId, pgid) {
      const e = runs.get(runId);
      if (e) e.run.pgid = pgid;
      send({ type: "group", runId, pgid });
    },
    unregister(runId) {
      runs.delete(runId);
      send({ type: "unregister", runId });
    },
    async close() {
      if (closing) return;
      closing = true;
      const exited = new Promise((r) => worker.once("exit", r));
      send({ type: "close" });
      const timer = setTimeout(() => void worker.terminate(), 5000);
      await exited;
      clearTimeout(timer);
      fs.rmSync(sock, { force: true });
      // The directory goes with its last socket (another supervisor's may still be in it).
      try {
        fs.rmdirSync(dir);
      } catch {
        // not empty: a `cronvisor run` of the same state dir still serves its run
      }
    },
  };
}

/** A worker serving the socket, once it listens; rejects with its reason when it cannot. */
function spawnWorker(stateDir: string, sock: string, store: StoreTarget | null): Promise<Worker> {
  const w = new Worker(new URL("./broker-worker.js", import.meta.url), {
    workerData: { stateDir, socketPath: sock, store },
  });
  return new Promise((resolve, reject) => {
    w.once("message", (m: FromWorker) => {
      if (m.type === "ready") resolve(w);
      else reject(new BrokerError(`the marker broker cannot start: ${m.message}`));
    });
    w.once("error", (e) => reject(new BrokerError(`the marker broker failed: ${e.message}`)));
  });
}

/**
 * A run's secret: an HMAC of its id and fence under the state dir's broker key, a random key kept
 * in the state dir (0700, root's; 0600). So a daemon restarted after a crash derives the secrets
 * of the runs it adopts (they still hold theirs), and a run's start writes no file of its own. A
 * secret tells nothing about another run's without the key.
 */
function runSecret(key: Buffer, runId: number, fence: number): string {
  return createHmac("sha256", key).update(`${runId}:${fence}`).digest("hex");
}

const KEY_BYTES = 32;

/** The state dir's broker key, made once (whole: written aside, then linked into place). */
function runKey(stateDir: string): Buffer {
  const file = path.join(stateDir, "broker.key");
  const existing = readKey(file);
  if (existing) return existing;
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, WRITE_NEW, 0o600);
  try {
    fs.writeSync(fd, randomBytes(KEY_BYTES));
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.linkSync(tmp, file); // EEXIST: another supervisor made it first; theirs is the key
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  const key = readKey(file);
  if (!key)
    throw new BrokerError(`the marker broker's key ${file} is not a ${KEY_BYTES}-byte file`);
  return key;
}

function readKey(file: string): Buffer | null {
  let fd: number;
  try {
    fd = fs.openSync(file, READ_NOFOLLOW);
  } catch {
    return null;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size !== KEY_BYTES) return null;
    const buf = Buffer.alloc(KEY_BYTES);
    return fs.readSync(fd, buf) === KEY_BYTES ? buf : null;
  } finally {
    fs.closeSync(fd);
  }
}

// The marker broker: where its socket lives, and the handle the supervising process (the daemon,
// or `cronvisor run`) uses to register each run before spawning it. Its server
// (broker-server.ts) answers on the supervising process's loop, which parses and authenticates a
// request in microseconds; every store call, and so every mark's fsync, runs on the broker's
// store thread (broker-store.ts, started only while marks come), never on the scheduler's loop.
// See README "Markers in jobs that run as other users" and DESIGN.md "Markers are durable and
// fenced".
import { createHash, createHmac, randomBytes } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { BrokerServer, secretHash } from "./broker-server.js";
import { BrokerStore, STORE_IDLE_MS } from "./broker-store.js";
import type { RunBroker } from "../core/types.js";
import { READ_NOFOLLOW, WRITE_NEW } from "../core/safe-path.js";
import type { StoreTarget } from "../store/store.js";

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
 * `idleMs`: how long the store thread lives without a call.
 */
export async function startBroker(
  stateDir: string,
  name: string,
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
  idleMs = STORE_IDLE_MS,
  store: StoreTarget | null = null,
): Promise<RunBroker> {
  const uid = process.getuid?.() ?? 0;
  const dir = socketDir(stateDir, uid);
  const sock = socketPath(dir, name);
  prepareSocketDir(dir, uid);
  const key = runKey(stateDir);
  const server = new BrokerServer(new BrokerStore(stateDir, log, idleMs, store));
  /** Each uid's socket: created at its first run, kept until close. */
  const sockets = new Map<number, string>([[uid, sock]]);
  const socketFor = (runUid: number): string =>
    sockets.get(runUid) ??
    serveUid(server, sockets, runUid, socketPath(dir, uidName(name, runUid)), log);
  fs.rmSync(sock, { force: true }); // a socket left by a killed supervisor of this dir
  try {
    await server.listen(sock, uid);
  } catch (e) {
    throw new BrokerError(`the marker broker cannot listen on ${sock}: ${(e as Error).message}`);
  }
  let closing = false;
  return {
    socketPath: sock,
    socketFor(runUid = uid) {
      // A daemon that is not root runs every job as itself: one socket.
      return uid === 0 ? socketFor(runUid) : sock;
    },
    register(r) {
      const secret = runSecret(key, r.runId, r.fence);
      server.register(secretHash(secret), {
        ...r,
        uid: uid === 0 ? (r.uid ?? uid) : uid,
        pgid: null,
      });
      return secret;
    },
    adopt(r) {
      // The run still holds the secret its own daemon derived: derive it again.
      const hash = secretHash(runSecret(key, r.runId, r.fence));
      const runUid = uid === 0 ? (r.uid ?? uid) : uid;
      if (uid === 0) socketFor(runUid); // its socket again: the run still names that path
      server.register(hash, {
        job: r.job,
        runId: r.runId,
        fence: r.fence,
        pgid: r.pgid,
        uid: runUid,
      });
      return true;
    },
    setGroup(runId, pgid) {
      server.setGroup(runId, pgid);
    },
    unregister(runId) {
      server.unregister(runId);
    },
    async close() {
      if (closing) return;
      closing = true;
      await server.close();
      for (const p of sockets.values()) fs.rmSync(p, { force: true });
      // The directory goes with its last socket (another supervisor's may still be in it).
      try {
        fs.rmdirSync(dir);
      } catch {
        // not empty: a `cronvisor run` of the same state dir still serves its run
      }
    },
  };
}

/** The socket of `uid`'s runs: `daemon.sock` -> `daemon-u1001.sock` (pure). */
const uidName = (name: string, uid: number): string =>
  `${name.replace(/\.sock$/, "")}-u${uid}.sock`;

/**
 * Serve the runs of `uid` on a socket only it (and root) may connect to: 0600, the uid's. The
 * kernel checks the connecting process's uid against the socket's owner, which is what
 * SO_PEERCRED would tell (Node has no API for it), and before any byte is read; and each uid has
 * its own listen queue and its own connection caps (broker-limits.ts), so no user can crowd out
 * another's runs, and a user with no job reaches no socket at all.
 */
function serveUid(
  server: BrokerServer,
  sockets: Map<number, string>,
  uid: number,
  p: string,
  log: (line: string) => void,
): string {
  fs.rmSync(p, { force: true }); // a socket left by a killed supervisor of this dir
  sockets.set(uid, p);
  // Bound now (root's 0600 until chowned); a failure to listen is the run's 69, and logged.
  server.listen(p, uid).catch((e: unknown) => {
    sockets.delete(uid);
    log(`cronvisor: the marker broker cannot listen on ${p}: ${(e as Error).message}`);
  });
  fs.chownSync(p, uid, -1);
  return p;
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

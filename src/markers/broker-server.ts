// The marker broker's server, on the supervising process's main thread: the only writer of
// markers for runs of the supervising process, whatever user a job runs as. A run is known by the
// sha256 of its secret (registered before the run is spawned, removed when its end is recorded);
// a request with an unknown secret, or naming another job, is refused, and every write is fenced
// again in the store (a run replaced or ended meanwhile writes nothing). Its store is the broker's
// store thread (broker-store.ts): the server only parses, authenticates and answers, and nothing
// a client sends can throw out of it into the scheduler's loop.
import net from "node:net";
import { createHash } from "node:crypto";
import { EXIT } from "../core/exit.js";
import type { MarkerStore } from "../store/store.js";
import { answer, type Registered } from "./broker-answer.js";

export type { Registered };
import { LINE_MAX, parseRequest, refusal, type Reply, type Request } from "./broker-protocol.js";
import {
  IDLE_MS,
  AUTH_MS,
  AUTH_LINE_MAX,
  SECRET_FIRST,
  MAX_PENDING,
  LINGER_MS,
  LINGER_BYTES,
  MAX_CONNECTIONS,
  HARD_MAX_CONNECTIONS,
  RUN_MAX_CONNECTIONS,
  UID_MAX_AUTHED,
  BACKLOG,
} from "./broker-limits.js";

/** One client connection, as serve() keeps it. */
interface Conn {
  s: net.Socket;
  /** The uid whose socket it came in on: only that uid (or root) could connect there. */
  uid: number;
  /** Its first line named a known secret: it is that run's (`run`), and serves only that run. */
  authed: boolean;
  run: Registered | null;
  /** No complete request for IDLE_MS: closed (set once authenticated). */
  idle: NodeJS.Timeout | null;
  /** Received and not yet parsed (a line at most, and one read). */
  buf: string;
  /** Requests parsed and not yet answered (at most MAX_PENDING). */
  pending: number;
  /** The last write() returned false: nothing is read or parsed until 'drain'. */
  blocked: boolean;
  /** Refused and half-closed: what still comes is dropped (`dropped` bytes so far). */
  ended: boolean;
  dropped: number;
  /** A pump() is scheduled (setImmediate: other connections' I/O comes between batches). */
  scheduled: boolean;
  /** Replies in request order. */
  chain: Promise<void>;
  deadline: NodeJS.Timeout | null;
}

/** A request line's run, or its refusal; `end`: the connection is then closed. */
type Checked =
  | { req: Request; reg: Registered }
  | { refused: Reply; end: true }
  | { refused: Reply; end: false; reg: Registered };

export const secretHash = (secret: string): string =>
  createHash("sha256").update(secret).digest("hex");

export class BrokerServer {
  private readonly runs = new Map<string, Registered>();
  private readonly byRun = new Map<number, string>();
  /** One listening socket per uid served. */
  private readonly servers = new Map<number, net.Server>();
  /** Every open connection of each uid, oldest first. */
  private readonly conns = new Map<number, Set<Conn>>();
  /** Each registered run's authenticated connections, oldest first. */
  private readonly runConns = new Map<number, Set<Conn>>();

  constructor(private readonly store: MarkerStore) {}

  register(hash: string, r: Registered): void {
    this.runs.set(hash, r);
    this.byRun.set(r.runId, hash);
  }

  /** Whether a socket for `uid` is being served. */
  serves(uid: number): boolean {
    return this.servers.has(uid);
  }

  setGroup(runId: number, pgid: number): void {
    const hash = this.byRun.get(runId);
    const r = hash === undefined ? undefined : this.runs.get(hash);
    if (r) r.pgid = pgid;
  }

  /**
   * The run is over (its end recorded, or it was never spawned): its secret is forgotten and its
   * connections are closed, so a process it left behind holds nothing of the broker's.
   */
  unregister(runId: number): void {
    const hash = this.byRun.get(runId);
    if (hash !== undefined) this.runs.delete(hash);
    this.byRun.delete(runId);
    const conns = this.runConns.get(runId);
    this.runConns.delete(runId);
    for (const c of conns ?? []) c.s.destroy();
  }

  /**
   * Serve `uid`'s socket at `socketPath`. Bound here, synchronously, under a 0177 umask: the
   * socket is root's 0600 from its first moment, until the caller hands it to `uid`.
   */
  listen(socketPath: string, uid: number): Promise<void> {
    const server = net.createServer((s) => this.serve(s, uid));
    server.maxConnections = HARD_MAX_CONNECTIONS;
    this.servers.set(uid, server);
    return new Promise((resolve, reject) => {
      server.once("error", (e) => {
        this.servers.delete(uid);
        reject(e);
      });
      const umask = process.umask(0o177);
      try {
        server.listen({ path: socketPath, backlog: BACKLOG }, () => {
          server.removeAllListeners("error");
          server.on("error", () => {}); // accept errors (EMFILE) must not end the broker
          resolve();
        });
      } finally {
        process.umask(umask);
      }
    });
  }

  async close(): Promise<void> {
    for (const set of this.conns.values()) for (const c of set) c.s.destroy();
    await Promise.all(
      [...this.servers.values()].map(
        (s) => new Promise<void>((resolve) => s.close(() => resolve())),
      ),
    );
    await this.store.close();
  }

  /**
   * One connection: lines in, one reply line per request, in order; errors stay here. Its work is
   * bounded: one line at a time is parsed while fewer than MAX_PENDING wait, nothing is read while
   * that many wait or while its replies are not being read, and it must authenticate first.
   */
  private serve(s: net.Socket, uid: number): void {
    let conns = this.conns.get(uid);
    if (!conns) this.conns.set(uid, (conns = new Set()));
    if (conns.size >= MAX_CONNECTIONS) this.evict(conns);
    const c: Conn = {
      s,
      uid,
      authed: false,
      run: null,
      idle: null,
      buf: "",
      pending: 0,
      blocked: false,
      ended: false,
      dropped: 0,
      scheduled: false,
      chain: Promise.resolve(),
      deadline: null,
    };
    conns.add(c);
    // Fired after the loop's poll phase (setImmediate): a first line that has arrived by then
    // is taken, even when the loop was busy (a tick spawning its runs) past the deadline.
    c.deadline = setTimeout(
      () =>
        setImmediate(() => {
          if (!c.authed) s.destroy();
        }),
      AUTH_MS,
    );
    s.on("error", () => {}); // a client that vanished: 'close' follows
    s.on("close", () => {
      conns.delete(c);
      if (c.run) this.runConns.get(c.run.runId)?.delete(c);
      if (c.deadline) clearTimeout(c.deadline);
      if (c.idle) clearTimeout(c.idle);
    });
    s.on("drain", () => {
      c.blocked = false;
      this.safely(c, () => this.pump(c));
    });
    s.setEncoding("utf8");
    s.on("data", (chunk: string) => {
      if (c.ended) {
        c.dropped += chunk.length;
        if (c.dropped > LINGER_BYTES) s.destroy();
        return;
      }
      c.buf += chunk;
      this.safely(c, () => this.pump(c));
    });
  }

  /** Parse what can be parsed now; read more only while there is room for it. */
  private pump(c: Conn): void {
    while (!c.ended && !c.blocked && c.pending < MAX_PENDING) {
      const nl = c.buf.indexOf("\n");
      if (nl < 0) break;
      const line = c.buf.slice(0, nl);
      c.buf = c.buf.slice(nl + 1);
      this.take(c, line);
    }
    if (!c.ended) this.checkLength(c);
    if (c.ended || (!c.blocked && c.pending < MAX_PENDING)) c.s.resume();
    else c.s.pause();
  }

  /** The line being received is refused past its limit (8 KiB before authenticating). */
  private checkLength(c: Conn): void {
    const nl = c.buf.indexOf("\n");
    const length = nl < 0 ? c.buf.length : nl;
    if (length <= AUTH_LINE_MAX) return;
    if (!c.authed) {
      const secret = SECRET_FIRST.exec(c.buf)?.[1];
      const reg = secret === undefined ? undefined : this.runs.get(secretHash(secret));
      if (reg === undefined || reg.uid !== c.uid)
        return this.refuse(
          c,
          refusal(
            EXIT.usage,
            `bad broker request: a first line over ${AUTH_LINE_MAX} bytes must start with a known secret`,
          ),
        );
      if (!this.authenticated(c, reg)) return;
    }
    if (length > LINE_MAX)
      this.refuse(c, refusal(EXIT.usage, `bad broker request: a line over ${LINE_MAX} bytes`));
  }

  /** One request line: checked now (it may authenticate the connection), answered in order. */
  private take(c: Conn, line: string): void {
    const checked = this.check(line, c);
    // A known secret authenticates, even for a request it may not make (another job's markers).
    if (!("reg" in checked)) return this.refuse(c, checked.refused);
    if (!c.authed && !this.authenticated(c, checked.reg)) return;
    c.idle?.refresh(); // idle time counts from the last complete request
    c.pending++;
    c.chain = c.chain
      .then(async () => {
        const reply = "refused" in checked ? checked.refused : await answer(this.store, checked);
        c.pending--;
        if (!c.s.destroyed && !c.s.writableEnded && !c.s.write(`${JSON.stringify(reply)}\n`))
          c.blocked = true;
        if (!c.scheduled) {
          c.scheduled = true;
          setImmediate(() => {
            c.scheduled = false;
            this.safely(c, () => this.pump(c));
          });
        }
      })
      .catch(() => {
        c.s.destroy();
      });
  }

  /**
   * Run a step of a connection's work; if it throws (it should not: parsing is total and every
   * store error is a reply), that connection is dropped and the supervising process goes on.
   */
  private safely(c: Conn, step: () => void): void {
    try {
      step();
    } catch {
      c.s.destroy();
    }
  }

  /**
   * The connection is `reg`'s from now on, within the run's and the uid's share: past either, the
   * oldest idle connection of the run (or else of the uid) makes room; with none idle, this one is
   * refused (69: the client may try again) and false is returned.
   */
  private authenticated(c: Conn, reg: Registered): boolean {
    let mine = this.runConns.get(reg.runId);
    if (!mine) this.runConns.set(reg.runId, (mine = new Set()));
    const ofUid = [...(this.conns.get(c.uid) ?? [])].filter((o) => o.authed);
    const room =
      (mine.size < RUN_MAX_CONNECTIONS || this.evictIdle(mine)) &&
      (ofUid.length < UID_MAX_AUTHED || this.evictIdle(ofUid));
    if (!room) {
      this.refuse(
        c,
        refusal(
          EXIT.unavailable,
          `refused: run ${reg.runId} of job ${reg.job} already has ${mine.size} connections to the marker broker, all busy`,
        ),
      );
      return false;
    }
    c.authed = true;
    c.run = reg;
    mine.add(c);
    if (c.deadline) clearTimeout(c.deadline);
    c.deadline = null;
    c.idle = setTimeout(() => this.idleOut(c), IDLE_MS);
    return true;
  }

  /** IDLE_MS since the last complete request: closed, unless a reply is still owed. */
  private idleOut(c: Conn): void {
    if (c.pending > 0 || c.s.writableLength > 0) c.idle?.refresh();
    else c.s.destroy();
  }

  /** Close the oldest authenticated connection of `conns` that owes no reply; false if none. */
  private evictIdle(conns: Iterable<Conn>): boolean {
    for (const o of conns) {
      if (!o.authed || o.pending > 0 || o.ended || o.s.writableLength > 0) continue;
      o.authed = false;
      if (o.run) this.runConns.get(o.run.runId)?.delete(o);
      o.s.destroy();
      return true;
    }
    return false;
  }

  /**
   * Reply (after the replies still owed) and half-close; nothing more is parsed. Half-close and
   * drop what still comes: closing with unread data would reset the connection, and the client
   * could lose the reply. It goes after LINGER_MS, or LINGER_BYTES dropped.
   */
  private refuse(c: Conn, r: Reply): void {
    c.ended = true;
    c.authed = false; // evictable
    c.buf = "";
    if (c.run) this.runConns.get(c.run.runId)?.delete(c);
    if (c.deadline) clearTimeout(c.deadline);
    if (c.idle) clearTimeout(c.idle);
    c.deadline = null;
    c.chain = c.chain
      .then(() => {
        if (!c.s.destroyed) c.s.end(`${JSON.stringify(r)}\n`);
        setTimeout(() => c.s.destroy(), LINGER_MS).unref();
      })
      .catch(() => {
        c.s.destroy();
      });
  }

  /**
   * Make room: the oldest refused connection still lingering goes, or else the oldest that has not
   * authenticated (runs' own stay). Its first line, if it sent one, was not read: the client may
   * send it again on a new connection.
   */
  private evict(conns: Set<Conn>): void {
    let oldest: Conn | null = null;
    for (const c of conns) {
      // A refused one that lingers has had its reply: it goes first.
      if (c.ended) {
        oldest = c;
        break;
      }
      if (!c.authed) oldest ??= c;
    }
    if (oldest === null) return;
    conns.delete(oldest);
    oldest.s.destroy();
  }

  /** A request line's parse and its run (by the secret's hash); pure but for the lookup. */
  private check(line: string, c: Conn): Checked {
    const req = parseRequest(line);
    if ("refused" in req) return { refused: req.refused, end: true };
    const reg = this.runs.get(secretHash(req.secret));
    // A run is served on its own uid's socket only, and a connection serves one run.
    if (!reg || reg.uid !== c.uid || (c.run !== null && c.run !== reg))
      return {
        refused: refusal(
          req.op === "check" ? EXIT.unavailable : EXIT.unknown,
          "refused: this run is not known to the marker broker (it has ended, or its CRONVISOR_SECRET is wrong); nothing was written",
        ),
        end: true,
      };
    if (req.job !== reg.job)
      return {
        refused: refusal(
          EXIT.unknown,
          `refused: run ${reg.runId} of job ${reg.job} may write only ${reg.job}'s markers, not ${req.job}'s; nothing was written`,
        ),
        end: false,
        reg,
      };
    return { req, reg };
  }
}

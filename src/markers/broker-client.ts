// The marker broker's client: `mark`, `check`, `once` and `progress` inside a run that was given
// CRONVISOR_BROKER and CRONVISOR_SECRET. It implements the MarkerStore the commands already use,
// over the broker's socket, so a job running as any user writes markers without the store's
// files (and without loading SQLite or any store module: this path never opens a connection).
import net from "node:net";
import { EXIT } from "../core/exit.js";
import type { ClaimOutcome, MarkerStore, MarkerWriter, Owner } from "../store/store.js";
import { MARK_LINE_TARGET, type Reply } from "./broker-protocol.js";
import { BrokerCallError } from "./target.js";

/** How long a reply may take (the broker waits up to 5 s for a busy store) before exit 69. */
const REPLY_MS = 60_000;
/** A connection unused this long is replaced: the broker closes idle ones after 30 s. */
const REUSE_MS = 20_000;
/**
 * A connection refused (the supervisor restarting: its socket is there, nobody listens yet) or
 * put off (EAGAIN: the socket's listen queue is full, say while processes of the same user flood
 * it) is tried again, with a growing pause, for this long before the call fails with exit 69.
 */
export const CONNECT_RETRY_MS = 5000;
const RETRY_FIRST_MS = 5;
const RETRY_MAX_MS = 250;
const RETRIED = new Set(["EAGAIN", "ECONNREFUSED"]);

export class BrokerClient implements MarkerStore {
  private sock: net.Socket | null = null;
  private lastUsed = 0;
  /** The request out, and the connection its reply must come on. */
  private waiting: {
    sock: net.Socket;
    resolve: (r: Reply) => void;
    reject: (e: Error) => void;
  } | null = null;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly path: string,
    private readonly secret: string,
    /** How long a reply may take before the call fails with exit 69. */
    private readonly replyMs = REPLY_MS,
  ) {}

  async close(): Promise<void> {
    this.sock?.destroy();
    this.sock = null;
  }

  async isDone(w: MarkerWriter, key: string): Promise<boolean> {
    return (await this.call({ op: "check", job: w.job, key })).done === true;
  }

  async markDone(w: MarkerWriter, keys: readonly string[]): Promise<number | null> {
    // One request per chunk that fits a request line; each is committed before its reply.
    let n = 0;
    for (const chunk of chunks(keys)) {
      n += (await this.call({ op: "mark", job: w.job, keys: chunk })).n ?? 0;
    }
    return n;
  }

  async takeClaim(w: MarkerWriter, key: string, me: Owner): Promise<ClaimOutcome> {
    return (await this.call({ op: "claim", job: w.job, key, pid: me.pid })).claim as ClaimOutcome;
  }

  async completeClaim(w: MarkerWriter, key: string, pid: number): Promise<boolean> {
    await this.call({ op: "complete", job: w.job, key, pid });
    return true;
  }

  async releaseClaim(job: string, key: string, pid: number): Promise<void> {
    await this.call({ op: "release", job, key, pid });
  }

  async setClaimCommand(job: string, key: string, pid: number, cmdPid: number): Promise<void> {
    await this.call({ op: "command", job, key, pid, cmd_pid: cmdPid });
  }

  async reportProgress(w: MarkerWriter, message: string | null): Promise<boolean> {
    await this.call({ op: "progress", job: w.job, message });
    return true;
  }

  /** One request, its reply; a refusal throws BrokerCallError with the broker's exit code. */
  private async call(req: Record<string, unknown>): Promise<Extract<Reply, { ok: true }>> {
    const reply = await this.request(req);
    if (!reply.ok) throw new BrokerCallError(reply.error, reply.code);
    return reply;
  }

  /**
   * One request and the broker's reply, a refusal included; rejects only when unreachable. The
   * secret comes first on the line: the broker takes a first line over 8 KiB (a `mark` of many
   * keys) only when it starts with a known secret.
   */
  request(req: Record<string, unknown>): Promise<Reply> {
    return this.send(`${JSON.stringify({ secret: this.secret, ...req })}\n`);
  }

  /**
   * One request at a time, in call order: `once` notes its command without waiting and then
   * completes its claim, and each reply must go to its own call.
   */
  private send(line: string): Promise<Reply> {
    const next = this.queue.then(() => this.exchange(line));
    this.queue = next.then(
      () => {},
      () => {},
    );
    return next;
  }

  /**
   * A connection the broker closed without a reply never had the request read (the broker makes
   * room by closing connections that have not authenticated yet, and runs' idle ones; a request
   * it read is answered before its connection is closed, unless the run has ended): it is sent
   * again on a new connection, with a growing pause, within CONNECT_RETRY_MS.
   */
  private async exchange(line: string): Promise<Reply> {
    const until = Date.now() + CONNECT_RETRY_MS;
    let sock = this.kept();
    for (let pause = RETRY_FIRST_MS; ; pause = Math.min(pause * 2, RETRY_MAX_MS)) {
      try {
        return await this.exchangeOn(sock ?? (await this.connection(until)), line);
      } catch (e) {
        if (!(e instanceof ClosedError) || Date.now() + pause > until) throw e;
        await backoff(pause);
        sock = null;
      }
    }
  }

  private exchangeOn(sock: net.Socket, line: string): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      this.waiting = { sock, resolve, reject };
      sock.write(line);
    }).finally(() => {
      this.waiting = null;
      this.lastUsed = Date.now();
    });
  }

  private kept(): net.Socket | null {
    if (this.sock && this.sock.writable && Date.now() - this.lastUsed < REUSE_MS) return this.sock;
    this.sock?.destroy();
    this.sock = null;
    return null;
  }

  /** A new connection, retried with backoff while refused or put off, until `until`. */
  private async connection(until: number): Promise<net.Socket> {
    for (let pause = RETRY_FIRST_MS; ; pause = Math.min(pause * 2, RETRY_MAX_MS)) {
      try {
        return await this.connect();
      } catch (e) {
        const code = (e as { code?: string }).code ?? "";
        if (!RETRIED.has(code) || Date.now() + pause > until)
          throw this.unavailable(
            RETRIED.has(code) ? `${code} for ${CONNECT_RETRY_MS / 1000} s` : code,
          );
        await backoff(pause);
      }
    }
  }

  private async connect(): Promise<net.Socket> {
    const sock = net.createConnection(this.path);
    sock.setEncoding("utf8");
    sock.setTimeout(this.replyMs, () =>
      sock.destroy(this.unavailable(`no answer in ${this.replyMs / 1000} s`)),
    );
    let buf = "";
    sock.on("data", (d: string) => {
      buf += d;
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        this.onReply(sock, buf.slice(0, nl));
        buf = buf.slice(nl + 1);
      }
    });
    // Each event is this connection's: one replaced or ended may still report its close.
    sock.on("error", (e: NodeJS.ErrnoException) => {
      const why = e instanceof BrokerCallError ? e : this.unavailable(e.code ?? e.message);
      // Closed by the broker under a request it did not read: as a close without a reply.
      const closed = e.code === "EPIPE" || e.code === "ECONNRESET";
      this.fail(sock, closed ? new ClosedError(why) : why);
    });
    // The broker ends a connection after refusing a request: the next call connects again.
    sock.on("end", () => {
      if (this.sock === sock) this.sock = null;
    });
    sock.on("close", () =>
      this.fail(sock, new ClosedError(this.unavailable("it closed the connection"))),
    );
    await new Promise<void>((resolve, reject) => {
      sock.once("connect", resolve);
      sock.once("error", (e: NodeJS.ErrnoException) =>
        reject(Object.assign(new Error(e.message), { code: e.code ?? e.message })),
      );
    });
    this.sock = sock;
    return sock;
  }

  private onReply(sock: net.Socket, line: string): void {
    if (this.waiting?.sock !== sock) return;
    let reply: Reply;
    try {
      reply = JSON.parse(line) as Reply;
    } catch {
      reply = { ok: false, code: EXIT.unavailable, error: "the marker broker answered garbage" };
    }
    this.waiting.resolve(reply);
    this.waiting = null;
  }

  private fail(sock: net.Socket, e: Error): void {
    if (this.sock === sock) this.sock = null;
    if (this.waiting?.sock !== sock) return;
    this.waiting.reject(e);
    this.waiting = null;
  }

  private unavailable(why: string): BrokerCallError {
    return new BrokerCallError(
      `cannot reach the marker broker at ${this.path} (${why}): is the daemon, or the run's \`cronvisor run\`, still running?`,
      EXIT.unavailable,
    );
  }
}

/** Jittered: clients put off together do not come back together. */
const backoff = (ms: number) => new Promise((r) => setTimeout(r, ms * (0.5 + Math.random() / 2)));

/** The broker closed the connection before replying (a BrokerCallError: exit 69). */
class ClosedError extends BrokerCallError {
  constructor(e: BrokerCallError) {
    super(e.message, e.exitCode);
  }
}

/** Keys in lists whose request line stays under the broker's limit (JSON may escape a key). */
export function* chunks(keys: readonly string[]): Generator<string[]> {
  let chunk: string[] = [];
  let bytes = 0;
  for (const k of keys) {
    const size = Buffer.byteLength(JSON.stringify(k)) + 1;
    if (chunk.length > 0 && bytes + size > MARK_LINE_TARGET) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(k);
    bytes += size;
  }
  if (chunk.length > 0) yield chunk;
}

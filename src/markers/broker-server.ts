// The marker broker's server, inside its worker thread (broker-worker.ts): the only writer of
// markers for runs of the supervising process, whatever user a job runs as. A run is known by the
// sha256 of its secret (registered by the main thread before the run is spawned, removed when its
// end is recorded); a request with an unknown secret, or naming another job, is refused, and every
// write is fenced again in the store (a run replaced or ended meanwhile writes nothing).
import net from "node:net";
import { createHash } from "node:crypto";
import { EXIT } from "../core/exit.js";
import { isAlive, processGroupOf, startTimeOf } from "../run/proc.js";
import type { MarkerStore, MarkerWriter } from "../store/store.js";
import { LINE_MAX, parseRequest, refusal, type Reply, type Request } from "./broker-protocol.js";
import { isBusy } from "./markers.js";

/** What the broker knows of one registered run. */
export interface Registered {
  job: string;
  runId: number;
  fence: number;
  /** The run's process group (== its main pid), set right after the spawn. */
  pgid: number | null;
}

/** A connection idle this long is closed (the client reconnects for its next request). */
const IDLE_MS = 30_000;
/** Requests a connection may have waiting before it is paused (pipelining is bounded). */
const MAX_PENDING = 16;
const MAX_CONNECTIONS = 512;

export const secretHash = (secret: string): string =>
  createHash("sha256").update(secret).digest("hex");

export class BrokerServer {
  private readonly runs = new Map<string, Registered>();
  private readonly byRun = new Map<number, string>();
  private readonly server: net.Server;
  private readonly conns = new Set<net.Socket>();

  constructor(private readonly store: MarkerStore) {
    this.server = net.createServer((s) => this.serve(s));
    this.server.maxConnections = MAX_CONNECTIONS;
  }

  register(hash: string, r: Registered): void {
    this.runs.set(hash, r);
    this.byRun.set(r.runId, hash);
  }

  setGroup(runId: number, pgid: number): void {
    const hash = this.byRun.get(runId);
    const r = hash === undefined ? undefined : this.runs.get(hash);
    if (r) r.pgid = pgid;
  }

  unregister(runId: number): void {
    const hash = this.byRun.get(runId);
    if (hash !== undefined) this.runs.delete(hash);
    this.byRun.delete(runId);
  }

  listen(socketPath: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(socketPath, () => {
        this.server.off("error", reject);
        this.server.on("error", () => {}); // accept errors (EMFILE) must not end the worker
        resolve();
      });
    });
  }

  async close(): Promise<void> {
    for (const s of this.conns) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await this.store.close();
  }

  /** One connection: lines in, one reply line per request, in order; errors stay here. */
  private serve(s: net.Socket): void {
    this.conns.add(s);
    s.setTimeout(IDLE_MS, () => s.destroy());
    s.on("error", () => {}); // a client that vanished: 'close' follows
    s.on("close", () => this.conns.delete(s));
    let buf = "";
    let pending = 0;
    let chain = Promise.resolve();
    let overlong = false;
    s.setEncoding("utf8");
    s.on("data", (chunk: string) => {
      if (overlong) return;
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (++pending >= MAX_PENDING) s.pause();
        chain = chain.then(async () => {
          const reply = await this.answer(line);
          if (!s.destroyed) s.write(`${JSON.stringify(reply)}\n`);
          if (--pending < MAX_PENDING) s.resume();
        });
      }
      if (buf.length > LINE_MAX) {
        buf = "";
        overlong = true;
        const r = refusal(EXIT.usage, `bad broker request: a line over ${LINE_MAX} bytes`);
        // Half-close and drop what still comes: closing with unread data would reset the
        // connection, and the client could lose the reply.
        s.end(`${JSON.stringify(r)}\n`);
      }
    });
  }

  /** The reply to one request line; never throws. */
  async answer(line: string): Promise<Reply> {
    const req = parseRequest(line);
    if ("refused" in req) return req.refused;
    const reg = this.runs.get(secretHash(req.secret));
    if (!reg)
      return refusal(
        req.op === "check" ? EXIT.unavailable : EXIT.unknown,
        "refused: this run is not known to the marker broker (it has ended, or its CRONVISOR_SECRET is wrong); nothing was written",
      );
    if (req.job !== reg.job)
      return refusal(
        EXIT.unknown,
        `refused: run ${reg.runId} of job ${reg.job} may write only ${reg.job}'s markers, not ${req.job}'s; nothing was written`,
      );
    try {
      return await this.act(req, reg);
    } catch (e) {
      const msg = (e as Error).message ?? String(e);
      if (isBusy(e)) return refusal(EXIT.busy, `the state store stayed busy: ${msg}`);
      return refusal(req.op === "check" ? EXIT.unavailable : EXIT.fail, msg);
    }
  }

  private async act(req: Request, reg: Registered): Promise<Reply> {
    const w: MarkerWriter = { job: reg.job, run: { id: reg.runId, fence: reg.fence } };
    const now = Date.now();
    const stale = refusal(
      EXIT.unknown,
      `refused: run ${reg.runId} (fence ${reg.fence}) is no longer the current run of job ${reg.job}; nothing was written`,
    );
    switch (req.op) {
      case "mark": {
        const n = await this.store.markDone(w, req.keys, now);
        return n === null ? stale : { ok: true, n };
      }
      case "check":
        return { ok: true, done: await this.store.isDone(w, req.key) };
      case "progress":
        return (await this.store.reportProgress(w, req.message, now)) ? { ok: true } : stale;
      default:
        return this.claimOp(req, reg, w, now, stale);
    }
  }

  /** `once`: the processes it names must be of the run's own group. */
  private async claimOp(
    req: Request & { op: "claim" | "complete" | "release" | "command" },
    reg: Registered,
    w: MarkerWriter,
    now: number,
    stale: Reply,
  ): Promise<Reply> {
    const foreign = [req.pid, ...(req.op === "command" ? [req.cmd_pid] : [])].find(
      (p) => reg.pgid === null || processGroupOf(p) !== reg.pgid,
    );
    if (foreign !== undefined)
      return refusal(
        EXIT.unknown,
        `refused: pid ${foreign} is not a process of run ${reg.runId} of job ${reg.job}`,
      );
    switch (req.op) {
      case "claim": {
        const me = { pid: req.pid, start: startTimeOf(req.pid) };
        return { ok: true, claim: await this.store.takeClaim(w, req.key, me, now, isAlive) };
      }
      case "command":
        await this.store.setClaimCommand(
          reg.job,
          req.key,
          req.pid,
          req.cmd_pid,
          startTimeOf(req.cmd_pid),
        );
        return { ok: true };
      case "complete":
        return (await this.store.completeClaim(w, req.key, req.pid, now)) ? { ok: true } : stale;
      case "release":
        await this.store.releaseClaim(reg.job, req.key, req.pid);
        return { ok: true };
    }
  }
}

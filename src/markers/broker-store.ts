// The store the marker broker serves from, on the supervising process's main thread: a
// MarkerStore whose every call runs on the broker's store thread (broker-worker.ts, its own
// connection), so no fsync sits on the scheduler's loop. The thread is a second V8 isolate (about
// 9 MiB here), so it runs only while marks come: started by the first call, closed once no call
// has come for `idleMs`. A daemon whose jobs never mark never starts it (BENCHMARKS.md, idle RSS).
import { Worker } from "node:worker_threads";
import { StoreError } from "../store/store.js";
import type { ClaimOutcome, MarkerStore, MarkerWriter, Owner } from "../store/store.js";
import type { FromWorker, StoreOp, ToWorker, WireError } from "./broker-worker.js";
import type { StoreTarget } from "../store/store.js";

/** How long the store thread stays without a call before it is closed. */
export const STORE_IDLE_MS = 60_000;
/** How long a closing thread may take to close its connection before it is terminated. */
const CLOSE_MS = 5000;

/** One store thread, from its start to its exit, and the calls posted to it. */
interface Thread {
  worker: Worker;
  /** Resolves once its connection is open; rejects with why it could not open one. */
  ready: Promise<void>;
  pending: Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>;
  idle: NodeJS.Timeout | null;
  /** Asked to close (idle, or the broker's close): its exit is no failure. */
  closing: boolean;
  exited: Promise<void>;
}

export class BrokerStore implements MarkerStore {
  private current: Thread | null = null;
  private nextId = 1;
  private closed = false;

  constructor(
    private readonly stateDir: string,
    private readonly log: (line: string) => void,
    private readonly idleMs = STORE_IDLE_MS,
    /** The config's store when it is not the state dir's SQLite (PostgreSQL, `store:`). */
    private readonly target: StoreTarget | null = null,
  ) {}

  isDone(w: MarkerWriter, key: string): Promise<boolean> {
    return this.call("isDone", [w, key]) as Promise<boolean>;
  }
  markDone(w: MarkerWriter, keys: readonly string[], now: number): Promise<number | null> {
    return this.call("markDone", [w, keys, now]) as Promise<number | null>;
  }
  /** The liveness check is the thread's own (the same /proc check as core/proc.ts's isAlive). */
  takeClaim(w: MarkerWriter, key: string, me: Owner, now: number): Promise<ClaimOutcome> {
    return this.call("takeClaim", [w, key, me, now]) as Promise<ClaimOutcome>;
  }
  completeClaim(w: MarkerWriter, key: string, pid: number, now: number): Promise<boolean> {
    return this.call("completeClaim", [w, key, pid, now]) as Promise<boolean>;
  }
  async releaseClaim(job: string, key: string, pid: number): Promise<void> {
    await this.call("releaseClaim", [job, key, pid]);
  }
  async setClaimCommand(
    job: string,
    key: string,
    pid: number,
    cmdPid: number,
    cmdStart: string | null,
  ): Promise<void> {
    await this.call("setClaimCommand", [job, key, pid, cmdPid, cmdStart]);
  }
  reportProgress(w: MarkerWriter, message: string | null, now: number): Promise<boolean> {
    return this.call("reportProgress", [w, message, now]) as Promise<boolean>;
  }

  /** Close the thread (after the calls already posted to it are answered). */
  async close(): Promise<void> {
    this.closed = true;
    const t = this.current;
    this.current = null;
    if (t) await this.stop(t);
  }

  /** Post one call to the thread, starting it if none runs; its result, or its error. */
  private call(op: StoreOp, args: unknown[]): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error("the marker broker is closing"));
    const t = (this.current ??= this.spawn());
    if (t.idle) clearTimeout(t.idle);
    t.idle = null;
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      // Held before the thread is ready: a thread that exits fails every call it was given.
      t.pending.set(id, { resolve, reject });
      t.ready.then(
        () => t.worker.postMessage({ type: "call", id, op, args } satisfies ToWorker),
        (e: Error) => {
          t.pending.delete(id);
          reject(e);
        },
      );
    });
  }

  private spawn(): Thread {
    const worker = new Worker(new URL("./broker-worker.js", import.meta.url), {
      workerData: { stateDir: this.stateDir, store: this.target },
    });
    let opened: () => void = () => {};
    let refused: (e: Error) => void = () => {};
    const ready = new Promise<void>((resolve, reject) => {
      opened = resolve;
      refused = reject;
    });
    ready.catch(() => {}); // a thread that cannot open fails its calls; nobody else waits on it
    const t: Thread = {
      worker,
      ready,
      pending: new Map(),
      idle: null,
      closing: false,
      exited: new Promise((r) => worker.once("exit", () => r())),
    };
    worker.on("message", (m: FromWorker) => {
      if (m.type === "ready") return opened();
      if (m.type === "failed") {
        this.forget(t);
        const e = new Error(`the marker broker cannot open the store: ${m.message}`);
        this.log(`cronvisor: ${e.message}`);
        return refused(e);
      }
      this.answer(t, m);
    });
    // An uncaught error in the thread (there should be none): its exit follows.
    worker.on("error", (e) =>
      this.log(`cronvisor: the marker broker's store thread: ${e.message}`),
    );
    worker.on("exit", (code) => {
      this.forget(t);
      const lost = new Error(`the marker broker's store thread stopped (exit ${code})`);
      refused(lost);
      for (const p of t.pending.values()) p.reject(lost);
      t.pending.clear();
      if (!t.closing && code !== 0)
        this.log(`cronvisor: ${lost.message}; the next request starts it again`);
    });
    return t;
  }

  private answer(t: Thread, m: Extract<FromWorker, { type: "result" | "error" }>): void {
    const p = t.pending.get(m.id);
    if (!p) return;
    t.pending.delete(m.id);
    if (m.type === "result") p.resolve(m.value);
    else p.reject(revive(m.error));
    if (t.pending.size === 0 && this.current === t) {
      t.idle = setTimeout(() => {
        if (this.current !== t || t.pending.size > 0) return;
        this.current = null;
        void this.stop(t);
      }, this.idleMs);
      t.idle.unref();
    }
  }

  /** Ask a thread to close its connection and exit; terminated if it does not in time. */
  private async stop(t: Thread): Promise<void> {
    t.closing = true;
    if (t.idle) clearTimeout(t.idle);
    t.worker.postMessage({ type: "close" } satisfies ToWorker);
    const timer = setTimeout(() => void t.worker.terminate(), CLOSE_MS);
    await t.exited;
    clearTimeout(timer);
  }

  private forget(t: Thread): void {
    if (this.current === t) this.current = null;
  }
}

/** The error a call failed with, as the broker's server judges it (isBusy, StoreError). */
function revive(e: WireError): Error {
  if (e.store) return new StoreError(e.message, e.store);
  const err = new Error(e.message);
  return e.code === undefined ? err : Object.assign(err, { code: e.code });
}

// The marker broker's store thread: its own connection to the store, so that the fsync of every
// mark happens off the supervising process's loop. It runs the MarkerStore calls the broker's
// server (broker-server.ts, on the main thread) makes through broker-store.ts, one at a time in
// the order they come, and posts each result or error back. Started at the first call, closed
// when idle (broker-store.ts).
import { parentPort, workerData } from "node:worker_threads";
import { isAlive } from "../core/proc.js";
import {
  StoreError,
  openMarkerStore,
  openMarkerStoreAt,
  type MarkerStore,
  type StoreTarget,
} from "../store/store.js";

/** The MarkerStore calls the thread runs (`close` is a message of its own). */
export type StoreOp = Exclude<keyof MarkerStore, "close">;

/** Messages from the main thread. */
export type ToWorker =
  { type: "call"; id: number; op: StoreOp; args: unknown[] } | { type: "close" };

/** An error as it crosses the thread: enough to tell a busy store (isBusy) and a StoreError. */
export interface WireError {
  message: string;
  code?: string;
  store?: StoreError["code"];
}

/** Messages to the main thread. */
export type FromWorker =
  | { type: "ready" }
  | { type: "failed"; message: string }
  | { type: "result"; id: number; value: unknown }
  | { type: "error"; id: number; error: WireError };

const { stateDir, store: target } = workerData as {
  stateDir: string;
  /** The config's store when it is not the state dir's SQLite (PostgreSQL, `store:`). */
  store: StoreTarget | null;
};
const port = parentPort;

/**
 * One call. The liveness check of takeClaim is a function, which cannot cross the thread: the
 * thread uses the same /proc check the broker passes.
 */
function run(store: MarkerStore, op: StoreOp, args: unknown[]): Promise<unknown> {
  if (op === "takeClaim") {
    const [w, key, me, now] = args as Parameters<MarkerStore["takeClaim"]>;
    return store.takeClaim(w, key, me, now, isAlive);
  }
  return (store[op] as (...a: unknown[]) => Promise<unknown>).apply(store, args);
}

function wire(e: unknown): WireError {
  const message = (e as Error).message ?? String(e);
  if (e instanceof StoreError) return { message, store: e.code };
  const code = (e as { code?: unknown }).code;
  return typeof code === "string" ? { message, code } : { message };
}

async function main(): Promise<void> {
  if (!port) return;
  let store: MarkerStore;
  try {
    const opts = { create: false, busyTimeoutMs: 5000 };
    store = await (target ? openMarkerStoreAt(target, opts) : openMarkerStore(stateDir, opts));
  } catch (e) {
    port.postMessage({ type: "failed", message: (e as Error).message } satisfies FromWorker);
    port.close();
    return;
  }
  port.on("message", (m: ToWorker) => {
    if (m.type === "close") {
      void store.close().finally(() => port.close());
      return;
    }
    void run(store, m.op, m.args).then(
      (value) => port.postMessage({ type: "result", id: m.id, value } satisfies FromWorker),
      (e: unknown) =>
        port.postMessage({ type: "error", id: m.id, error: wire(e) } satisfies FromWorker),
    );
  });
  port.postMessage({ type: "ready" } satisfies FromWorker);
}

void main();

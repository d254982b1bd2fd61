// The marker broker's worker thread: its own store connection and the socket server
// (broker-server.ts), so that the fsync of every mark happens off the scheduler's loop. The main
// thread (broker.ts) talks to it by messages only: register, group, unregister, close.
import fs from "node:fs";
import { parentPort, workerData } from "node:worker_threads";
import { openMarkerStore, openMarkerStoreAt, type StoreTarget } from "../store/store.js";
import { BrokerServer, type Registered } from "./broker-server.js";

/** Messages from the main thread. */
export type ToWorker =
  | { type: "register"; hash: string; run: Registered }
  | { type: "group"; runId: number; pgid: number }
  | { type: "unregister"; runId: number }
  | { type: "close" };

/** Messages to the main thread. */
export type FromWorker = { type: "ready" } | { type: "failed"; message: string };

const {
  stateDir,
  socketPath,
  store: target,
} = workerData as {
  stateDir: string;
  socketPath: string;
  /** The config's store when it is not the state dir's SQLite (PostgreSQL, `store:`). */
  store: StoreTarget | null;
};
const port = parentPort;

async function main(): Promise<void> {
  if (!port) return;
  let server: BrokerServer;
  try {
    const opts = { create: false, busyTimeoutMs: 5000 };
    const store = await (target
      ? openMarkerStoreAt(target, opts)
      : openMarkerStore(stateDir, opts));
    server = new BrokerServer(store);
    fs.rmSync(socketPath, { force: true }); // a socket left by a killed supervisor of this dir
    await server.listen(socketPath);
    // Reached by any user: a run authenticates with its secret, not with file modes.
    fs.chmodSync(socketPath, 0o666);
  } catch (e) {
    port.postMessage({ type: "failed", message: (e as Error).message } satisfies FromWorker);
    port.close();
    return;
  }
  port.on("message", (m: ToWorker) => {
    switch (m.type) {
      case "register":
        server.register(m.hash, m.run);
        break;
      case "group":
        server.setGroup(m.runId, m.pgid);
        break;
      case "unregister":
        server.unregister(m.runId);
        break;
      case "close":
        void server.close().finally(() => port.close());
        break;
    }
  });
  port.postMessage({ type: "ready" } satisfies FromWorker);
}

void main();

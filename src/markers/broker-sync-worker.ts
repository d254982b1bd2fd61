// The worker thread behind broker-sync.ts: one BrokerClient, one request at a time from the
// library's thread, each reply posted back and the shared flag raised (never a throw: an
// unreachable broker is a reply with exit 69).
import { workerData, type MessagePort } from "node:worker_threads";
import { EXIT } from "../core/exit.js";
import { BrokerClient } from "./broker-client.js";
import type { Reply } from "./broker-protocol.js";

const { socketPath, secret, port, flag } = workerData as {
  socketPath: string;
  secret: string;
  port: MessagePort;
  flag: Int32Array;
};
const client = new BrokerClient(socketPath, secret);

port.on("message", (req: Record<string, unknown>) => {
  void client.request(req).then(
    (reply) => answer(reply),
    (e: unknown) => {
      const code = (e as { exitCode?: number }).exitCode ?? EXIT.unavailable;
      answer({ ok: false, code, error: (e as Error).message });
    },
  );
});
port.on("close", () => void client.close());

function answer(reply: Reply): void {
  port.postMessage(reply);
  Atomics.store(flag, 0, 1);
  Atomics.notify(flag, 0);
}

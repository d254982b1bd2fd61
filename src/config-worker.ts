// The daemon parses its config in a worker thread. Parsing a 1,000-job YAML (the document with
// line positions, one croner check per schedule) leaves tens of MiB of garbage that V8 keeps as
// the daemon's RSS for its whole life; in a worker, that heap goes away with the worker and only
// the plain Config comes back (structured clone). A reload parses there too, so a big config
// never blocks the scheduler's thread.
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import type { ParseResult } from "./config.js";

export function loadConfigInWorker(file: string): Promise<ParseResult> {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL(import.meta.url), { workerData: { file } });
    let result: ParseResult | null = null;
    w.once("message", (r: ParseResult) => (result = r));
    w.once("error", reject);
    // Resolve once the worker is gone, so its heap is freed before the daemon goes on.
    w.once("exit", (code) =>
      result ? resolve(result) : reject(new Error(`the config parser exited with code ${code}`)),
    );
  });
}

if (!isMainThread && parentPort) {
  const { loadConfig } = await import("./config.js");
  parentPort.postMessage(loadConfig((workerData as { file: string }).file));
}

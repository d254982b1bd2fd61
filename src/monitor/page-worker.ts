// The status page's worker thread: its own read-only store connection, so that reading every
// job's runs and building a page of 1,000 jobs never sits on the scheduler's loop (a client
// reloading the page every second must not move a slot). The main thread (page-client.ts) sends
// it the config the daemon runs and each request; it answers each with a whole response.
import os from "node:os";
import { isMainThread, parentPort, workerData } from "node:worker_threads";
import { openStoreAt, type Store, type StoreTarget } from "../store/store.js";
import { pageModel, pageQuery } from "./page-data.js";
import { PageReads } from "./page-reads.js";
import { notice } from "./page-html.js";
import { renderMain } from "./page-main.js";
import { runPage, type PageContext } from "./page-run.js";
import { whyPage } from "./page-why.js";
import type { HttpResponse } from "./http.js";
import type { Config } from "../core/types.js";

/** Messages from the main thread. */
export type ToPageWorker =
  | { type: "config"; config: Config }
  | { type: "request"; id: number; path: string; query: string; now: number }
  | { type: "close" };

/** Messages to the main thread. */
export type FromPageWorker = { type: "response"; id: number; response: HttpResponse };

/**
 * The worker's nice above the thread that started it (the daemon's loop): Linux keeps a nice per
 * thread (src/run/priority.ts relies on the same), so while a page is built the scheduler still
 * wins the CPU whenever it wakes up, on a machine with as many busy threads as cores.
 */
export const PAGE_NICE_OFFSET = 10;

/** The worker's nice, given the loop's (pure): at most 19, the kernel's lowest. */
export const pageNice = (own: number): number => Math.min(19, own + PAGE_NICE_OFFSET);

/** Best effort: a page built at the loop's nice is better than no page. */
function lowerOwnPriority(): void {
  try {
    os.setPriority(0, pageNice(os.getPriority(0)));
  } catch {
    // a raised nice needs no privilege; were it refused, the page is built at the loop's
  }
}
// Only in the worker: a module that imported this one on the loop must not renice the loop.
if (!isMainThread) lowerOwnPriority();

const { target } = workerData as { target: StoreTarget };
const stateDir = target.stateDir;
const port = parentPort;

let config: Config | null = null;
const encoder = new TextEncoder();
let store: Promise<PageReads> | null = null;

/**
 * The store, opened at the first request: read-only (a bug here cannot write), sharing the
 * daemon's view of the WAL. The daemon's store is the one it started with (`target`). Its rows
 * are kept while it does not change (page-reads.ts).
 */
function theStore(): Promise<PageReads> {
  store ??= openStoreAt(target, { create: false, readonly: true, busyTimeoutMs: 2000 }).then(
    (s: Store) => new PageReads(s),
  );
  store.catch(() => (store = null)); // opened again at the next request
  return store;
}

/** The page a path names: `/`, `/runs/ID`, `/why/JOB`. */
export async function answer(
  ctx: PageContext & { reads: PageReads },
  path: string,
  query: URLSearchParams,
): Promise<HttpResponse> {
  if (path === "/") {
    const model = await pageModel(ctx.config, ctx.reads, ctx.now, pageQuery(query));
    return renderMain(model, ctx.config.timezone);
  }
  if (path.startsWith("/runs/")) return runPage(ctx, path.slice("/runs/".length), query);
  if (path.startsWith("/why/")) return whyPage(ctx, path.slice("/why/".length), query);
  return notice(404, "not found", `Nothing is served at ${path}.`);
}

async function request(m: Extract<ToPageWorker, { type: "request" }>): Promise<HttpResponse> {
  if (!config) return notice(503, "starting", "The page has no config yet; try again in a moment.");
  let reads: PageReads;
  try {
    reads = await theStore();
  } catch (e) {
    return notice(
      503,
      "store unavailable",
      `The page cannot open the store: ${(e as Error).message}`,
    );
  }
  const t0 = performance.now();
  const r = await answer(
    { config, store: reads.store, reads, stateDir, now: m.now },
    m.path,
    new URLSearchParams(m.query),
  );
  // How long the page took to build, for a browser's developer tools (and the tests).
  const ms = (performance.now() - t0).toFixed(1);
  return { ...r, headers: { ...r.headers, "Server-Timing": `build;dur=${ms}` } };
}

port?.on("message", (m: ToPageWorker) => {
  switch (m.type) {
    case "config":
      config = m.config;
      break;
    case "request":
      void request(m)
        .catch((e: unknown) =>
          notice(500, "internal error", `The page could not be built: ${(e as Error).message}`),
        )
        .then((response) => {
          // As bytes in a buffer of their own, handed over (not copied) to the main thread: a
          // page of 1,000 jobs is megabytes, and the loop should not spend time copying it.
          const body =
            typeof response.body === "string" ? encoder.encode(response.body) : response.body;
          const message: FromPageWorker = {
            type: "response",
            id: m.id,
            response: { ...response, body },
          };
          port.postMessage(message, [body.buffer as ArrayBuffer]);
        });
      break;
    case "close":
      void (store ?? Promise.resolve(null))
        .then((r) => r?.store.close())
        .catch(() => {})
        .finally(() => port.close());
      break;
  }
});

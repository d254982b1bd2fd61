// The status page as the daemon's loop sees it: a worker thread (page-worker.ts) that builds
// each page, started at the first request and ended after PAGE_IDLE_MS without one (an idle
// daemon holds no second isolate for a page nobody looks at). The loop only passes messages: the
// store reads and the HTML are the worker's. A worker that fails or dies answers 503 and is
// started again at the next request; requests past MAX_WAITING wait for nothing (503 busy).
import v8 from "node:v8";
import { Worker, type WorkerOptions } from "node:worker_threads";
import { notice } from "./page-html.js";
import type { HttpRequest, HttpResponse } from "./http.js";
import type { FromPageWorker, ToPageWorker } from "./page-worker.js";
import type { Config } from "../core/types.js";
import type { StoreTarget } from "../store/store.js";

/** A worker no request reached for this long is ended. */
export const PAGE_IDLE_MS = 60_000;
/** A page not built in this long is answered 503 (the worker goes on; its answer is dropped). */
const PAGE_TIMEOUT_MS = 30_000;
/** Requests waiting for the worker at once; more are refused (one local user cannot queue work without end). */
const MAX_WAITING = 16;
/** The worker's heap: a page of 1,000 jobs over 7 days fits; a bigger one ends the worker, not the daemon. */
const HEAP_MB = 512;

/** The worker's young generation: V8's default on 64 bits (two 16 MiB semi-spaces, and 16 MiB). */
const YOUNG_MB = 48;

/** The process's `--max-semi-space-size`, from NODE_OPTIONS then its command line (the last counts). */
export function semiSpaceFlag(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? "",
): string | null {
  const args = [...nodeOptions.split(/\s+/), ...execArgv];
  let value: string | null = null;
  for (let i = 0; i < args.length; i++) {
    const m = /^--max[-_]semi[-_]space[-_]size(?:=(.*))?$/.exec(args[i] as string);
    if (m) value = m[1] ?? args[i + 1] ?? null;
  }
  return value;
}

/**
 * A worker thread with a young generation of YOUNG_MB whatever the process's
 * `--max-semi-space-size`. The unit sets that flag to 1 (MiB), which keeps an idle daemon's heap
 * small; but a V8 flag overrides a worker's resourceLimits, and a page of 1,000 jobs (megabytes
 * of report objects and strings, the rows kept between loads) was then scavenged about ten
 * times per load, what it kept copied and promoted each time: half the worker's CPU for a load
 * after a commit (BENCHMARKS.md). So the flag is unset while the worker's isolate is made and
 * set back once it runs, as settle.ts sets `--expose-gc` for one context: the loop's heap was
 * made with the flag and keeps it, and any later isolate gets it again.
 */
export function pageWorkerThread(file: string | URL, options: WorkerOptions): Worker {
  const young = {
    ...options,
    resourceLimits: { ...options.resourceLimits, maxYoungGenerationSizeMb: YOUNG_MB },
  };
  const flag = semiSpaceFlag();
  if (flag === null) return new Worker(file, young);
  v8.setFlagsFromString("--max-semi-space-size=0"); // 0: the isolate's own limits decide
  const restore = () => v8.setFlagsFromString(`--max-semi-space-size=${flag}`);
  let w: Worker;
  try {
    w = new Worker(file, young);
  } catch (e) {
    restore();
    throw e;
  }
  w.once("online", restore);
  w.once("exit", restore);
  return w;
}

interface Waiting {
  resolve: (r: HttpResponse) => void;
  timer: NodeJS.Timeout;
}

export class PageClient {
  private worker: Worker | null = null;
  private sent: Config | null = null;
  private readonly waiting = new Map<number, Waiting>();
  private nextId = 1;
  private idle: NodeJS.Timeout | null = null;

  /**
   * `target`: the daemon's store, as it started (a reload's new `state_dir` or `store:` waits for
   * a restart): SQLite in its state dir, or the PostgreSQL store its nodes share.
   */
  constructor(
    private readonly target: StoreTarget,
    private readonly log: (line: string) => void,
  ) {}

  /** The page for `req`, built by the worker from `config` at `now`. */
  answer(config: Config, req: HttpRequest, now: number): Promise<HttpResponse> {
    if (this.waiting.size >= MAX_WAITING)
      return Promise.resolve(
        notice(503, "busy", "Too many pages are being built at once; try again in a moment."),
      );
    const w = this.ensure();
    if (config !== this.sent) {
      this.post(w, { type: "config", config });
      this.sent = config;
    }
    const id = this.nextId++;
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.settle(
          id,
          notice(503, "too slow", `The page was not built within ${PAGE_TIMEOUT_MS / 1000} s.`),
        );
      }, PAGE_TIMEOUT_MS);
      this.waiting.set(id, { resolve, timer });
      this.post(w, { type: "request", id, path: req.path, query: req.query.toString(), now });
    });
  }

  private post(w: Worker, m: ToPageWorker): void {
    w.postMessage(m);
  }

  private ensure(): Worker {
    if (this.worker) return this.worker;
    const w = pageWorkerThread(new URL("./page-worker.js", import.meta.url), {
      workerData: { target: this.target },
      resourceLimits: { maxOldGenerationSizeMb: HEAP_MB },
    });
    // Never what keeps the daemon's process alive: its stop closes it, and an exit ends it.
    w.unref();
    w.on("message", (m: FromPageWorker) => {
      if (m.type === "response") this.settle(m.id, m.response);
    });
    w.on("error", (e) => this.log(`cronvisor: http: the page's worker failed: ${e.message}`));
    w.on("exit", () => {
      if (this.worker !== w) return;
      this.worker = null;
      this.sent = null;
      for (const id of [...this.waiting.keys()])
        this.settle(
          id,
          notice(503, "page unavailable", "The page's worker stopped; reload to try again."),
        );
    });
    this.worker = w;
    return w;
  }

  private settle(id: number, r: HttpResponse): void {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    clearTimeout(w.timer);
    w.resolve(r);
    if (this.waiting.size === 0 && this.worker) {
      this.idle = setTimeout(() => void this.close(), PAGE_IDLE_MS);
      this.idle.unref();
    }
  }

  /** End the worker (idle, or the daemon stops); the next request starts another. */
  async close(): Promise<void> {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    const w = this.worker;
    if (!w) return;
    this.worker = null;
    this.sent = null;
    const exited = new Promise((r) => w.once("exit", r));
    w.postMessage({ type: "close" } satisfies ToPageWorker);
    const timer = setTimeout(() => void w.terminate(), 2000);
    await exited;
    clearTimeout(timer);
    for (const id of [...this.waiting.keys()])
      this.settle(id, notice(503, "page unavailable", "The daemon is stopping."));
  }
}

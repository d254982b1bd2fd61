// The monitor's HTTP endpoints: /healthz (is the daemon beating), /status (the same report as
// `cronvisor status --json`) and /metrics, each reading the store the daemon holds at that
// moment; and the status page (`/`, `/runs/ID`, `/why/JOB`), built off the loop by the page's
// worker (page-client.ts) from its own connection to the same store.
import { diskFacts } from "../core/disk.js";
import { formatDurationRounded } from "../core/duration.js";
import { beating } from "../health/health.js";
import { buildStatus } from "../health/status.js";
import { text, type HttpRequest, type Routes } from "./http.js";
import type { Metrics } from "./metrics.js";
import type { PageClient } from "./page-client.js";
import type { Store } from "../store/store.js";
import type { Config } from "../core/types.js";

export interface RouteSource {
  /** The daemon's store, or null before its first beat. */
  store: () => Store | null;
  config: () => Config;
  now: () => number;
  metrics: Metrics;
  /** The status page's worker. */
  pages: PageClient;
}

export function monitorRoutes(src: RouteSource): Routes {
  const starting = text(503, "starting: the daemon has not recorded a heartbeat yet\n");
  // Not before the daemon's first beat: until then the store may not be made or migrated.
  const page = (req: HttpRequest) =>
    src.store()?.isOpen() ? src.pages.answer(src.config(), req, src.now()) : starting;
  return {
    "/": page,
    "/runs/": page,
    "/why/": page,
    "/healthz": async () => {
      const store = src.store();
      if (!store?.isOpen()) return starting;
      const now = src.now();
      const d = await store.daemon();
      if (!d || d.pid !== process.pid || d.heartbeat_at === null) return starting;
      const ageText = formatDurationRounded(Math.max(0, now - d.heartbeat_at));
      return beating(d, now)
        ? text(200, `ok: beating, last heartbeat ${ageText} ago\n`)
        : text(
            503,
            `not beating: last heartbeat ${ageText} ago (every ${formatDurationRounded(d.heartbeat_ms ?? 0)})\n`,
          );
    },
    "/status": async () => {
      const store = src.store();
      if (!store?.isOpen()) return starting;
      const cfg = src.config();
      const disk = diskFacts(cfg.stateDir, cfg.store === null);
      const report = await buildStatus(cfg, store, src.now(), null, null, undefined, disk);
      return {
        status: 200,
        contentType: "application/json; charset=utf-8",
        body: `${JSON.stringify(report, null, 2)}\n`,
      };
    },
    "/metrics": async () => {
      const body = await src.metrics.render(src.now());
      return body === null ? starting : { status: 200, contentType: src.metrics.contentType, body };
    },
  };
}

// The monitor's HTTP endpoints: /healthz (is the daemon beating), /status (the same report as
// `cronvisor status --json`) and /metrics. Each reads the store the daemon holds at that moment.
import { formatDurationRounded } from "../core/duration.js";
import { beating } from "../health/health.js";
import { buildStatus } from "../health/status.js";
import { text, type HttpResponse } from "./http.js";
import type { Metrics } from "./metrics.js";
import type { Store } from "../store/store.js";
import type { Config } from "../core/types.js";

export interface RouteSource {
  /** The daemon's store, or null before its first beat. */
  store: () => Store | null;
  config: () => Config;
  now: () => number;
  metrics: Metrics;
}

export function monitorRoutes(
  src: RouteSource,
): Record<string, () => HttpResponse | Promise<HttpResponse>> {
  const starting = text(503, "starting: the daemon has not recorded a heartbeat yet\n");
  return {
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
      const report = await buildStatus(src.config(), store, src.now());
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

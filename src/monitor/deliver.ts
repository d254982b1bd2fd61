// Delivery of what the monitor sends: one retrying queue (Outbox) per alert target and per job's
// ping URL, built here so monitor.ts keeps only the watching. A queue never blocks the daemon: a
// full one drops (and counts) what does not fit, and a slow target delays only its own queue.
import path from "node:path";
import { origin, Outbox, post, runAlertCommand, type Alert, type PingKind } from "./alerts.js";
import type { Metrics } from "./metrics.js";
import { buildJobEnv } from "../run/env.js";
import type { AlertTarget, Config } from "../core/types.js";

const WEBHOOK_TIMEOUT_MS = 10_000;
const COMMAND_TIMEOUT_MS = 30_000;
const PING_TIMEOUT_MS = 10_000;
const ALERT_QUEUE = 1000;
const PING_QUEUE = 100;

export interface PingItem {
  job: string;
  kind: PingKind;
  runId: number;
  url: string;
  body: string;
}

/**
 * The queue of one alert target. A command target reads the config (shell, directory, env) when
 * it delivers, so an alert sent after a reload runs as the new config says.
 */
export function alertBox(
  target: AlertTarget,
  config: () => Config,
  metrics: Metrics,
  log: (line: string) => void,
): Outbox<Alert> {
  const kind = target.kind;
  const deliver =
    target.kind === "webhook"
      ? (a: Alert) => post(target.url, JSON.stringify(a), "application/json", WEBHOOK_TIMEOUT_MS)
      : (a: Alert) =>
          runAlertCommand(
            {
              command: target.command,
              shell: config().shell,
              cwd: path.dirname(config().file),
              // The same hygiene as a job's: a minimal base plus the config's env, no daemon secrets.
              env: buildJobEnv({
                base: process.env,
                configEnv: config().env,
                envFileText: null,
                envFilePath: null,
                cronvisor: {},
                user: null,
              }),
              timeoutMs: COMMAND_TIMEOUT_MS,
            },
            a,
          );
  return new Outbox<Alert>(
    deliver,
    (a) => `${a.event} alert for ${a.job}`,
    {
      name: target.kind === "webhook" ? `alert webhook ${origin(target.url)}` : "alert command",
      maxQueue: ALERT_QUEUE,
      attempts: 5,
      baseDelayMs: 1000,
      maxDelayMs: 60_000,
      log,
      onDrop: () => metrics.alertsDropped.inc({ target: kind }),
    },
    (a, ok) =>
      (ok ? metrics.alertsSent : metrics.alertsFailed).inc({
        event: a.event,
        target: kind,
      }),
  );
}

/** The queue of one job's pings (`ping:`, healthchecks-style); `url` names it in the log. */
export function pingBox(
  job: string,
  url: string,
  metrics: Metrics,
  log: (line: string) => void,
): Outbox<PingItem> {
  return new Outbox<PingItem>(
    (p) => post(p.url, p.body, "text/plain; charset=utf-8", PING_TIMEOUT_MS),
    (p) => `${p.kind} ping of run ${p.runId}`,
    {
      name: `ping ${origin(url)} (job: ${job})`,
      maxQueue: PING_QUEUE,
      attempts: 3,
      baseDelayMs: 1000,
      maxDelayMs: 10_000,
      log,
    },
    (p, ok) => {
      if (!ok) metrics.pingsFailed.inc({ job_name: p.job });
    },
  );
}

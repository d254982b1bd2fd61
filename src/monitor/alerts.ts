// Alerts and pings: what the daemon tells the outside world, and how it gets there.
//
// Events: `failed`, `timeout`, `stuck`, `repeating`, `late`, `idle` announce a job entering a
// condition (failing, stuck, repeating, late, idle) and `recovered` announces it leaving the last
// one; each is sent once per transition (or again every `realert_every`, and `failed` only from
// the `failures_before_alert`th failure: health/alert-rules.ts decides), judged by the same
// health function `status` uses. `interrupted` is sent once per run recorded interrupted (its
// processes died with a daemon).
//
// Delivery never blocks the scheduler and never loses a run's record: hooks run after the store
// recorded the run, and only push onto a bounded in-memory queue per target; a worker delivers
// each item in order, retrying with exponential backoff, and logs what it finally could not send.
// Nothing secret is logged: a target shows as its origin (`https://hooks.example.com`), never its
// path or query, which often carry tokens.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import os from "node:os";
import { formatSeconds } from "../core/duration.js";
import { VERSION } from "../core/version.js";
import type { Assessment, HealthWord } from "../health/health.js";
import {
  CONDITIONS,
  decideAlerts,
  ONCE,
  type AlertEventName,
  type AlertRules,
  type Announced,
  type Condition,
} from "../health/alert-rules.js";
import type { RunRow } from "../store/rows.js";

export type AlertEvent = AlertEventName;
/** The level-type states an alert announces entering and (all of them) leaving. */
export { CONDITIONS, type Condition };

const USER_AGENT = `cronvisor/${VERSION}`;

/** What a target receives: the webhook's JSON body, the command's stdin (and, flattened, its env). */
export interface Alert {
  event: AlertEvent;
  job: string;
  run_id: number | null;
  /** The job's health word when the alert was raised. */
  health: HealthWord;
  /** One line: `backup failed: the last run failed (run 12: failed, exit 3)`. */
  message: string;
  /** A condition still in force announced again (`realert_every`). */
  repeat: boolean;
  /** Every current problem of the job, as in `status`. */
  problems: string[];
  at: string;
  host: string;
  /** `message` with the host in front, for chat webhooks (Slack, Mattermost) that show `text`. */
  text: string;
}

export interface Transition {
  /** The conditions now in force, to remember until the next evaluation. */
  after: Condition[];
  /** The same, each with when it was last announced. */
  announced: Map<Condition, number>;
  events: { event: AlertEvent; runId: number | null; message: string; repeat?: true }[];
}

/**
 * Pure: the events a job's move from the conditions last announced (`before`: a list, or each
 * with when it was announced) to those its assessment shows at `now`. Entering a condition
 * announces it once; leaving the last one announces `recovered`; anything else (staying failing,
 * one of two conditions clearing) is silent, but for the job's `rules` (health/alert-rules.ts).
 * `failingStatus` is the status of the run that made the job failing (`timeout` -> `timeout`).
 */
export function transitions(
  job: string,
  before: readonly Condition[] | Announced,
  a: Assessment,
  failingStatus: string | null,
  rules: AlertRules = ONCE,
  now = 0,
): Transition {
  const was: Announced = Array.isArray(before)
    ? new Map(before.map((c) => [c, now]))
    : (before as Announced);
  const d = decideAlerts(job, was, a, failingStatus, rules, now);
  return {
    after: CONDITIONS.filter((c) => d.announced.has(c)),
    announced: d.announced,
    events: d.events,
  };
}

/**
 * `interrupted`: once per run whose processes died with a daemon, or that was fenced (its node
 * lost its lease and the job was taken over), recorded as such.
 */
export function interruptedEvent(run: RunRow): Transition["events"][number] {
  const fenced = run.status === "fenced" ? " was fenced" : "";
  return {
    event: "interrupted",
    runId: run.id,
    message: `${run.job} interrupted: run ${run.id}${fenced}${run.reason ? ` (${run.reason})` : ""}`,
  };
}

export function makeAlert(
  job: string,
  e: Transition["events"][number],
  health: HealthWord,
  problems: string[],
  now: number,
): Alert {
  const host = os.hostname();
  return {
    event: e.event,
    job,
    run_id: e.runId,
    health,
    message: e.message,
    repeat: e.repeat === true,
    problems,
    at: new Date(now).toISOString(),
    host,
    text: `[cronvisor@${host}] ${e.message}`,
  };
}

// ---- the outbox: a bounded queue per target, one delivery at a time, retried with backoff ----

export interface OutboxOptions {
  /** For log lines: `webhook https://hooks.example.com`. */
  name: string;
  /** Waiting items beyond this drop the oldest (logged and counted). */
  maxQueue: number;
  attempts: number;
  /** First retry delay; doubles per retry up to maxDelayMs. */
  baseDelayMs: number;
  maxDelayMs: number;
  log: (line: string) => void;
  onDrop?: () => void;
}

export interface OutboxCounters {
  sent: number;
  failed: number;
  dropped: number;
}

export class Outbox<T> {
  private readonly queue: T[] = [];
  private working = false;
  private closed = false;
  private wake: (() => void) | null = null;
  private idle: (() => void)[] = [];
  readonly counters: OutboxCounters = { sent: 0, failed: 0, dropped: 0 };

  constructor(
    private readonly deliver: (item: T) => Promise<void>,
    private readonly describe: (item: T) => string,
    private readonly opts: OutboxOptions,
    private readonly onResult: (item: T, ok: boolean) => void = () => {},
  ) {}

  /** Never blocks and never throws: the item waits for the worker. */
  push(item: T): void {
    if (this.closed) return;
    if (this.queue.length >= this.opts.maxQueue) {
      const old = this.queue.shift() as T;
      this.counters.dropped++;
      this.opts.onDrop?.();
      this.opts.log(
        `cronvisor: ${this.opts.name}: queue full (${this.opts.maxQueue}); dropped ${this.describe(old)}`,
      );
    }
    this.queue.push(item);
    if (!this.working) void this.work();
  }

  get pending(): number {
    return this.queue.length + (this.working ? 1 : 0);
  }

  private async work(): Promise<void> {
    this.working = true;
    try {
      for (let item = this.queue.shift(); item !== undefined; item = this.queue.shift()) {
        const ok = await this.attempt(item);
        if (ok) this.counters.sent++;
        else this.counters.failed++;
        try {
          this.onResult(item, ok);
        } catch {
          // counting is best effort
        }
      }
    } finally {
      this.working = false;
      for (const f of this.idle.splice(0)) f();
    }
  }

  private async attempt(item: T): Promise<boolean> {
    let delay = this.opts.baseDelayMs;
    for (let n = 1; ; n++) {
      try {
        await this.deliver(item);
        return true;
      } catch (e) {
        const why = (e as Error).message;
        if (n >= this.opts.attempts || this.closed) {
          this.opts.log(
            `cronvisor: ${this.opts.name}: giving up on ${this.describe(item)} after ${n} attempt(s): ${why}`,
          );
          return false;
        }
        this.opts.log(
          `cronvisor: ${this.opts.name}: ${this.describe(item)} failed (${why}); retry ${n} in ${delay} ms`,
        );
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, delay);
          this.wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.wake = null;
        delay = Math.min(delay * 2, this.opts.maxDelayMs);
      }
    }
  }

  /** Wait until everything queued is delivered or given up, or until `ms` passed; returns what is left. */
  async drain(ms: number): Promise<number> {
    if (this.pending === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.idle.push(resolve)),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))),
    ]);
    clearTimeout(timer);
    return this.pending;
  }

  /** Stop retrying (the item in flight gets one last try) and accept nothing more. */
  close(): void {
    this.closed = true;
    this.wake?.();
  }
}

// ---- delivery -----------------------------------------------------------------------------

/** `https://hooks.example.com`: enough to tell targets apart in a log, nothing secret. */
export function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return "(bad url)";
  }
}

/** POST a body; any answer but 2xx (or no answer within timeoutMs) is an error. */
export async function post(
  url: string,
  body: string,
  contentType: string,
  timeoutMs: number,
): Promise<void> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": contentType, "user-agent": USER_AGENT },
    body,
    signal: AbortSignal.timeout(timeoutMs),
  });
  await res.arrayBuffer().catch(() => undefined);
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
}

export interface CommandTarget {
  command: string;
  shell: string;
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
}

/**
 * Run an alert command with `shell -c`, the alert as JSON on stdin and as CRONVISOR_* variables.
 * Its own process group, killed whole at the timeout; exit 0 is delivered, anything else fails.
 */
export function runAlertCommand(t: CommandTarget, alert: Alert): Promise<void> {
  return new Promise((resolve, reject) => {
    const env = { ...t.env, ...alertEnv(alert) };
    const child = spawn(t.shell, ["-c", t.command], {
      cwd: t.cwd,
      env,
      detached: true,
      stdio: ["pipe", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => {
      if (stderr.length < 2000) stderr += d.toString("utf8");
    });
    child.stdin?.on("error", () => {}); // a command that does not read stdin is fine
    child.stdin?.end(`${JSON.stringify(alert)}\n`);
    const timer = setTimeout(() => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }, t.timeoutMs);
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve();
      const tail = stderr.trim().split("\n").slice(-1)[0] ?? "";
      reject(
        new Error(
          `${code !== null ? `exit ${code}` : `killed by ${signal}`}${tail ? `: ${tail}` : ""}`,
        ),
      );
    });
  });
}

export function alertEnv(a: Alert): Record<string, string> {
  return {
    CRONVISOR_EVENT: a.event,
    CRONVISOR_JOB: a.job,
    CRONVISOR_RUN_ID: a.run_id === null ? "" : String(a.run_id),
    CRONVISOR_HEALTH: a.health,
    CRONVISOR_MESSAGE: a.message,
    CRONVISOR_PROBLEMS: a.problems.join("\n"),
    CRONVISOR_AT: a.at,
    CRONVISOR_HOST: a.host,
  };
}

// ---- healthchecks.io-style pings ------------------------------------------------------------

export type PingKind = "start" | "success" | "fail";

/**
 * A run's id as healthchecks wants it (`rid` must be a UUID): derived from the state dir and the
 * run, so the daemon that adopts a run after a restart pings its end with the same id.
 */
export function runUuid(stateDir: string, run: Pick<RunRow, "id" | "started_at">): string {
  const h = createHash("sha256").update(`${stateDir}\0${run.id}\0${run.started_at}`).digest("hex");
  // RFC 9562 version 8 (custom), variant 10xx.
  const variant = ((Number.parseInt(h.slice(16, 17), 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** `URL/start`, `URL`, `URL/fail`, each with `?rid=`; a query already on URL (`?create=1`) is kept. */
export function pingUrl(base: string, kind: PingKind, rid: string): string {
  const u = new URL(base);
  const path = u.pathname.replace(/\/+$/, "");
  u.pathname = kind === "success" ? path : `${path}/${kind}`;
  u.searchParams.set("rid", rid);
  return u.toString();
}

/** What a run's end pings: only `ok` is success; failed, timeout, killed, interrupted all fail. */
export function pingKindOf(status: string): PingKind {
  return status === "ok" ? "success" : "fail";
}

/** The body of a ping: healthchecks shows it next to the event. */
export function pingBody(run: RunRow, kind: PingKind): string {
  const what = `cronvisor run ${run.id} of ${run.job} (${run.trigger ?? "manual"}, attempt ${run.attempt})`;
  if (kind === "start") return `${what} started\n`;
  return `${what}: ${run.status}${run.reason ? `, ${run.reason}` : ""}${run.duration_ms !== null ? ` after ${formatSeconds(run.duration_ms)}` : ""}\n`;
}

// When a job's health is worth an alert: the conditions an assessment puts in force, the events a
// move from what was last announced to them makes, and when one is due again. Pure functions of
// (assessment, what was announced and when, the job's rules, now); monitor/alerts.ts delivers.
//
// The rules (docs/health.md):
//   - each condition (failing, stuck, repeating, late, idle) is announced once on entry, and
//     `recovered` once when the last one clears;
//   - `failures_before_alert: N`: failing counts as a condition only from the Nth failed run in
//     a row (the streak is counted over the newest 20 runs, so N above 20 acts as 20): fewer
//     failures are not announced, and their later success is no recovery;
//   - `realert_every: D`: a condition still in force D after it was last announced is announced
//     again (`repeat: true`, the message says "still"), until it clears.
import type { Assessment, Finding } from "./health.js";
import type { JobConfig } from "../core/types.js";

export type Condition = "failing" | "stuck" | "repeating" | "late" | "idle";
export const CONDITIONS: readonly Condition[] = ["failing", "stuck", "repeating", "late", "idle"];

/** The failing streak is counted over the newest runs the job's summary keeps. */
const STREAK_WINDOW = 20;

/** A job's `failures_before_alert` and `realert_every` (null: once per condition). */
export type AlertRules = Pick<JobConfig, "failuresBeforeAlert" | "realertEveryMs">;

/** The default rules: announce the first failure, never repeat. */
export const ONCE: AlertRules = { failuresBeforeAlert: 1, realertEveryMs: null };

/** The conditions last announced, each with when it was last announced. */
export type Announced = ReadonlyMap<Condition, number>;

export type AlertEventName =
  "failed" | "timeout" | "late" | "stuck" | "repeating" | "idle" | "interrupted" | "recovered";

export interface AlertDecision {
  /** The conditions in force after this evaluation, with when each was last announced. */
  announced: Map<Condition, number>;
  /** `repeat`: a condition still in force, announced again (realert_every). */
  events: { event: AlertEventName; runId: number | null; message: string; repeat?: true }[];
}

const isCondition = (w: string | null): w is Condition =>
  w !== null && (CONDITIONS as readonly string[]).includes(w);

/** The conditions in force for alerting, each with its first (worst-first) finding. */
export function conditionsInForce(a: Assessment, rules: AlertRules): Map<Condition, Finding> {
  const out = new Map<Condition, Finding>();
  const needed = Math.min(Math.max(1, rules.failuresBeforeAlert), STREAK_WINDOW);
  for (const f of a.findings) {
    if (!isCondition(f.word) || out.has(f.word)) continue;
    if (f.word === "failing" && (f.count ?? 1) < needed) continue;
    out.set(f.word, f);
  }
  return out;
}

/**
 * The events of a job's move from `before` to what `a` shows at `now`. `failingStatus` is the
 * status of the run that made the job failing (`timeout` -> event `timeout`, else `failed`).
 */
export function decideAlerts(
  job: string,
  before: Announced,
  a: Assessment,
  failingStatus: string | null,
  rules: AlertRules,
  now: number,
): AlertDecision {
  const inForce = conditionsInForce(a, rules);
  const announced = new Map<Condition, number>();
  const events: AlertDecision["events"] = [];
  for (const c of CONDITIONS) {
    const f = inForce.get(c);
    if (f === undefined) continue;
    const last = before.get(c);
    const event: AlertEventName =
      c === "failing" ? (failingStatus === "timeout" ? "timeout" : "failed") : c;
    if (last === undefined) {
      announced.set(c, now);
      events.push({ event, runId: f.runId, message: `${job} ${event}: ${f.message}` });
    } else if (rules.realertEveryMs !== null && now - last >= rules.realertEveryMs) {
      announced.set(c, now);
      events.push({
        event,
        runId: f.runId,
        message: `${job} ${event} (still): ${f.message}`,
        repeat: true,
      });
    } else {
      announced.set(c, last);
    }
  }
  if (before.size > 0 && announced.size === 0) {
    events.push({
      event: "recovered",
      runId: null,
      message: `${job} recovered: no longer ${[...before.keys()].join(", ")}; health is ${a.health}`,
    });
  }
  return { announced, events };
}

/** When a condition in force is next due to be announced again; null: never. */
export function nextRealertAt(announced: Announced, rules: AlertRules): number | null {
  if (rules.realertEveryMs === null || announced.size === 0) return null;
  return Math.min(...announced.values()) + rules.realertEveryMs;
}

/**
 * The store's alert_state.active text: `failing@1711929600000,late@1711933200000`. A bare name
 * (written before realert_every existed) was announced at the row's `since`.
 */
export function formatAnnounced(a: Announced): string {
  return CONDITIONS.filter((c) => a.has(c))
    .map((c) => `${c}@${a.get(c)}`)
    .join(",");
}

export function parseAnnounced(active: string, since: number): Map<Condition, number> {
  const out = new Map<Condition, number>();
  for (const part of active.split(",")) {
    const [name = "", at] = part.split("@");
    if (!isCondition(name)) continue;
    const t = at === undefined ? since : Number(at);
    out.set(name, Number.isFinite(t) ? t : since);
  }
  return out;
}

// `why`: what became of one slot of a job, and why. Pure: a function of the job's config, the
// store's facts about the slot (Store.slotFacts), the schedule and `now`; the command reads the
// store and prints. Its JSON field names are a public contract (README): rename none.
import { nextSlotAt, prevSlotAt } from "../schedule/schedule.js";
import { formatLocal, formatWall, gapAround } from "../schedule/zone.js";
import { chainedSentence, comingBlackout, heldSentence } from "./why-hold.js";
import { utcBeside, type Target, type WhyJob } from "./why-time.js";
import type { RunRow, SlotFacts } from "../store/store.js";
import type { DaemonState } from "./health.js";
import { formatDuration, formatDurationRounded, formatSeconds } from "../core/duration.js";
import type { RunStatus } from "../core/types.js";

import { heldElsewhere } from "./why-blocked.js";
import { holdSentences } from "./why-holds.js";
import { fencedSentence } from "./why-fenced.js";

export { resolveTarget, type Target, type WhyJob } from "./why-time.js";

export type Disposition =
  "ran" | "running" | "queued" | "skipped" | "missed" | "caught_up" | "not_a_slot" | "not_due";

export interface WhyReport {
  job: string;
  /** The slot (ISO UTC), or null when TIME is no slot of the job. */
  slot: string | null;
  disposition: Disposition;
  /** The slot's run (its latest attempt), or null when no process ran for it. */
  run_id: number | null;
  /** The node that ran the slot's run (its latest attempt) or recorded its disposition; null
   * when no row says (no row yet, or one from before rows carried their node). */
  node: string | null;
  /** The recorded reason (`overlap: run 12 holds the lock`, `paused`, `daemon down`, `exit 3`). */
  reason: string | null;
  /** The sentences `why` prints, the first naming the job and the slot in its local time. */
  explanation: string[];
  timezone: string;
  /** The schedule's slots before and after the slot (or TIME). */
  previous_slot: string | null;
  next_slot: string | null;
}

const iso = (t: number | null): string | null => (t === null ? null : new Date(t).toISOString());

/** Everything the explanation is built from. */
export interface WhyInput {
  job: WhyJob;
  target: Target;
  /** The store's facts about the slot (null when TIME is no slot, or there is no store). */
  facts: SlotFacts | null;
  daemon: DaemonState;
  now: number;
}

/** What the store's rows and the schedule say became of the slot, and why. */
export function explainWhy(w: WhyInput): WhyReport {
  const { job, target } = w;
  if (target.kind === "time") return notASlot(job, target);
  const slot = target.slot;
  const local = formatLocal(slot, job.timezone);
  const told: Told = slot > w.now ? notDue(w, slot) : fromFacts(w, slot, w.facts ?? NO_FACTS);
  const head = `${job.name}, slot ${local} ${job.timezone} (${utcBeside(slot, local)}): ${told.disposition}`;
  return {
    job: job.name,
    slot: iso(slot),
    disposition: told.disposition,
    run_id: told.runId,
    node: told.node ?? null,
    reason: told.reason,
    explanation: [head, ...(target.note ? [target.note] : []), ...told.sentences],
    timezone: job.timezone,
    previous_slot: iso(prevSlotAt(job, slot)),
    next_slot: iso(nextSlotAt(job, slot)),
  };
}

/** No store yet: nothing recorded. */
const NO_FACTS: SlotFacts = {
  job: null,
  daemon: null,
  claim: null,
  runs: [],
  holder: null,
  running: [],
  pause: null,
  catchUps: [],
  missedEvent: null,
  lastBefore: null,
  firstAfter: null,
};

/** One disposition's answer: the words after the first line. */
interface Told {
  disposition: Disposition;
  runId: number | null;
  /** The node of the row it is told from (none: no row). */
  node?: string | null;
  reason: string | null;
  sentences: string[];
}

interface Ctx extends WhyInput {
  slot: number;
  f: SlotFacts;
  /** A time in the job's zone. */
  at: (t: number) => string;
}

/** The dispositions a slot's rows say (the others come from the schedule and the clock). */
type RowDisposition = Exclude<Disposition, "queued" | "not_a_slot" | "not_due">;

/**
 * What a slot's first row makes of it. A new run status (the many-hosts issue's `fenced`) is a
 * word in Disposition, a line here and a line in EXPLAIN (`fenced: (c) => ran(c, "fenced")`): the
 * compiler asks for each.
 */
const FROM_ROW: Record<RunStatus, RowDisposition> = {
  running: "ran",
  ok: "ran",
  failed: "ran",
  timeout: "ran",
  killed: "ran",
  interrupted: "ran",
  fenced: "ran",
  spawn_failed: "ran",
  skipped: "skipped",
  missed: "missed",
};

/** Each row disposition's sentences. */
const EXPLAIN: Record<RowDisposition, (c: Ctx) => Told> = {
  ran: (c) => ran(c, "ran"),
  running: (c) => ran(c, "running"),
  caught_up: (c) => ran(c, "caught_up"),
  skipped,
  missed,
};

/** A run that goes on makes its slot `running`; a catch-up that ran it makes it `caught_up`. */
function rowDisposition(runs: RunRow[]): RowDisposition {
  const first = runs[0] as RunRow;
  const last = runs[runs.length - 1] as RunRow;
  const d = FROM_ROW[first.status];
  if (d !== "ran") return d;
  if (last.status === "running") return "running";
  return first.trigger === "catchup" ? "caught_up" : "ran";
}

function fromFacts(w: WhyInput, slot: number, f: SlotFacts): Told {
  const c: Ctx = { ...w, slot, f, at: (t) => formatLocal(t, w.job.timezone) };
  if (f.runs.length === 0) return noRow(c);
  return EXPLAIN[rowDisposition(f.runs)](c);
}

/** A run's sentence: `Run 12 (schedule) ok, exit 0, took 1.2s: started ..., ended ...; markers ...`. */
function runSentence(c: Ctx, r: RunRow, first: boolean): string {
  const attempt = r.attempt > 1 ? `, attempt ${r.attempt}` : "";
  const head = `Run ${r.id} (${r.trigger ?? "schedule"}${attempt})`;
  const late = first ? ` (${Math.max(0, r.started_at - c.slot)} ms after the slot)` : "";
  const markers = `markers: ${r.markers_new} new, ${r.markers_skipped} already done`;
  const started = `started ${c.at(r.started_at)}${late}`;
  if (r.status === "running") {
    const pid = r.pid === null ? "" : `, pid ${r.pid}`;
    const prog =
      r.progress_at === null
        ? ""
        : `, last progress ${formatDurationRounded(Math.max(0, c.now - r.progress_at))} ago${r.progress_msg ? ` (${r.progress_msg})` : ""}`;
    return `${head} is running: ${started}${pid}${prog}; ${markers} so far.`;
  }
  const how = r.reason && r.status !== "ok" ? ` (${r.reason})` : "";
  const exit = r.exit_code !== null && r.status === "ok" ? `, exit ${r.exit_code}` : "";
  const took = r.duration_ms === null ? "" : `, took ${formatSeconds(r.duration_ms)}`;
  const end = r.finished_at === null ? "" : `, ended ${c.at(r.finished_at)}`;
  return `${head} ${r.status}${how}${exit}${took}: ${started}${end}; ${markers}.`;
}

function ran(c: Ctx, disposition: "ran" | "running" | "caught_up"): Told {
  const runs = c.f.runs;
  const last = runs[runs.length - 1] as RunRow;
  const sentences: string[] = [];
  const first = runs[0] as RunRow;
  sentences.push(...chainedSentence(c.job, first));
  if (first.trigger === "catchup")
    sentences.push(
      `The daemon was down at the slot: ${downWindow(c, c.f.firstAfter)}. When it started, catchup: ${c.job.catchup} ran the slot.`,
    );
  runs.forEach((r, i) => {
    sentences.push(runSentence(c, r, i === 0));
    if (r.status === "fenced") sentences.push(fencedSentence(r));
  });
  return { disposition, runId: last.id, node: last.node, reason: last.reason, sentences };
}

function skipped(c: Ctx): Told {
  const row = c.f.runs[0] as RunRow;
  const reason = row.reason;
  const sentences: string[] = [];
  const held = reason === null ? null : holdSentences(reason, c.job.overlap);
  if (reason === "paused") sentences.push(pausedSentence(c));
  else if (reason?.startsWith("overlap") && c.f.holder) sentences.push(...heldBy(c, c.f.holder));
  else if (held) sentences.push(...held);
  else if (reason !== null && heldSentence(c.job, reason) !== null)
    sentences.push(heldSentence(c.job, reason) as string);
  else if (reason?.startsWith("lock held by node ")) {
    const later = c.f.runs.slice(1).map((r) => runSentence(c, r, false));
    sentences.push(...heldElsewhere(reason, c.job, later));
  } else sentences.push(`Skipped: ${reason ?? "no reason recorded"}.`);
  return { disposition: "skipped", runId: null, node: row.node, reason, sentences };
}

function pausedSentence(c: Ctx): string {
  const p = c.f.pause;
  if (p?.kind === "paused")
    return `Skipped: the job was paused by \`cronvisor pause ${c.job.name}\` at ${c.at(p.at)} (\`cronvisor resume ${c.job.name}\` fires it again).`;
  if (c.job.paused) return "Skipped: the job is paused by its config (paused: true).";
  return "Skipped: the job was paused (by its config then: the store records no `cronvisor pause`).";
}

function heldBy(c: Ctx, h: RunRow): string[] {
  const pid = h.pid === null ? "" : `, pid ${h.pid}`;
  return [
    `Skipped: run ${h.id} held the job's lock (running since ${c.at(h.started_at)}${pid}), and overlap is ${c.job.overlap}.`,
    runSentence(c, h, false),
  ];
}

/** The daemon's downtime around the slot, as far as the store's records bound it. */
function downWindow(c: Ctx, upAgain: number | null): string {
  const from =
    c.f.lastBefore === null
      ? "the store has no record from before the slot"
      : `its last record before the slot is from ${c.at(c.f.lastBefore)}`;
  const to = upAgain === null ? "" : `, and it started again at ${c.at(upAgain)}`;
  return `${from}${to}`;
}

function missed(c: Ctx): Told {
  const row = c.f.runs[0] as RunRow;
  const reason = row.reason;
  const sentences: string[] = [];
  if (reason === "daemon down") {
    sentences.push(
      `Missed: the daemon was down at the slot: ${downWindow(c, row.started_at)}, when it recorded the slot missed.`,
    );
    sentences.push(catchUpSentence(c));
  } else if (reason?.startsWith("timer late")) {
    sentences.push(
      `Missed: the daemon's timer fired late (a suspend or a clock step), and it recorded the slot missed at ${c.at(row.started_at)}.`,
    );
  } else sentences.push(`Missed: ${reason ?? "no reason recorded"}.`);
  return { disposition: "missed", runId: null, node: row.node, reason, sentences };
}

function catchUpSentence(c: Ctx): string {
  const policy = `catchup: ${c.job.catchup}`;
  const runs = c.f.catchUps;
  if (runs.length === 0) {
    if (c.job.catchup === "skip") return `Catch-up: none (${policy}).`;
    return `Catch-up: no slot was run again (${policy}; none was within catchup_window, ${formatDuration(c.job.catchupWindowMs)}).`;
  }
  const list = runs
    .map((r) => `run ${r.id} for the slot ${c.at(r.slot ?? r.started_at)} (${r.status})`)
    .join(", ");
  const why =
    c.job.catchup === "once"
      ? "it runs only the latest slot"
      : `it runs the slots within catchup_window, ${formatDuration(c.job.catchupWindowMs)}`;
  return `Catch-up (${policy}): ${list}; this slot was not run again (${why}).`;
}

/** A slot the store has no row of: pruned, before the job was watched, passed, or still coming. */
function noRow(c: Ctx): Told {
  const { f, job } = c;
  const told = (disposition: Disposition, reason: string | null, ...s: string[]): Told => ({
    disposition,
    runId: null,
    reason,
    sentences: s,
  });
  if (f.claim !== null) {
    if (f.claim.run_id !== null)
      return {
        ...told(
          "ran",
          null,
          `Ran as run ${f.claim.run_id}, whose record has since been pruned (log.keep_runs: ${job.log.keepRuns}).`,
        ),
        runId: f.claim.run_id,
      };
    return told(
      "skipped",
      null,
      "It did not run (skipped or missed); its record has since been pruned.",
    );
  }
  const seen = f.job?.first_seen_at ?? null;
  if (seen === null || seen > c.slot)
    return told(
      "not_a_slot",
      null,
      seen === null
        ? "The daemon has never watched this job, so it has no slots yet."
        : `The daemon first watched this job at ${c.at(seen)}; its slots count from then.`,
    );
  if ((f.job?.scanned_to ?? 0) >= c.slot) {
    const e = f.missedEvent;
    return e
      ? told(
          "missed",
          "daemon down",
          `Missed while the daemon was down, one of the slots counted but not listed: ${e.detail ?? ""} (recorded at ${c.at(e.at)}).`,
        )
      : told("missed", null, "Missed: the daemon passed the slot without recording it.");
  }
  return pending(c, told);
}

/** A past slot the daemon has not recorded yet: it is down, or the slot waits. */
function pending(
  c: Ctx,
  told: (d: Disposition, reason: string | null, ...s: string[]) => Told,
): Told {
  const { f, job } = c;
  if (c.daemon !== "running") {
    // The daemon row keeps its stop only until the next start: while it is down, it is there.
    const stopped = f.daemon?.stopped_at ?? null;
    const since =
      stopped !== null
        ? ` (it stopped at ${c.at(stopped)})`
        : f.lastBefore === null
          ? ""
          : ` (its last record is from ${c.at(f.lastBefore)})`;
    const plan =
      job.catchup === "skip"
        ? "records the slots that passed missed"
        : job.catchup === "once"
          ? `runs the latest slot within catchup_window (${formatDuration(job.catchupWindowMs)}) and records the others missed`
          : `runs every slot within catchup_window (${formatDuration(job.catchupWindowMs)})`;
    return told(
      "missed",
      "daemon down",
      `Missed: the daemon is ${c.daemon === "down" ? "down" : "not beating"}${since}. When it starts, catchup: ${job.catchup} ${plan}.`,
    );
  }
  const holder = f.running[0];
  if (job.overlap === "queue" && holder)
    return told(
      "queued",
      `overlap: run ${holder.id} holds the lock`,
      `Queued: run ${holder.id} holds the job's lock (running since ${c.at(holder.started_at)}); overlap: queue starts this slot when it ends.`,
    );
  return told(
    "queued",
    null,
    `Queued: due ${formatDurationRounded(c.now - c.slot)} ago; the daemon has not recorded its start yet.`,
  );
}

function notDue(w: WhyInput, slot: number): Told {
  const sentences = [`Not due yet: the slot comes in ${formatDurationRounded(slot - w.now)}.`];
  if (w.job.paused || w.facts?.job?.paused === 1)
    sentences.push("The job is paused: unless it is resumed first, the slot will be skipped.");
  sentences.push(...comingBlackout(w.job, slot));
  if (w.daemon !== "running") sentences.push("The daemon is not running now.");
  return { disposition: "not_due", runId: null, reason: null, sentences };
}

function notASlot(job: WhyJob, t: Extract<Target, { kind: "time" }>): WhyReport {
  const zone = job.timezone;
  const ref = t.at;
  const wall = formatWall(t.wall);
  const head =
    ref === null
      ? `${job.name}, ${wall} ${zone} (no such local time): not_a_slot`
      : `${job.name}, ${wall} ${zone} (${utcBeside(ref, wall)}): not_a_slot`;
  // In a gap, the neighbours are the slots around the change.
  const around = ref ?? gapAround(t.wall, zone).at;
  const before = prevSlotAt(job, ref === null ? around : around + 1);
  const after = nextSlotAt(job, ref === null ? around - 1 : around);
  const show = (s: number | null) =>
    s === null ? "none" : `${formatLocal(s, zone)} (${utcBeside(s, formatLocal(s, zone))})`;
  const sentences =
    job.pattern === null
      ? ["@reboot has no slots in time: it runs once each time the machine boots."]
      : [
          `No slot of "${job.schedule}" then: the one before is ${show(before)}, the one after ${show(after)}.`,
        ];
  return {
    job: job.name,
    slot: null,
    disposition: "not_a_slot",
    run_id: null,
    node: null,
    reason: null,
    explanation: [head, ...(t.note ? [t.note] : []), ...sentences],
    timezone: zone,
    previous_slot: iso(before),
    next_slot: iso(after),
  };
}

// `why` for what chains, the drain and blackouts made of a slot: a chained run's origin, a slot
// skipped while drained or inside a blackout window, and a coming slot that a window will skip.
import { blackoutAt } from "../schedule/windows.js";
import type { RunRow } from "../store/store.js";
import type { WhyJob } from "./why-time.js";

/** The sentence of a skip for the drain or a blackout (its recorded reason), or null. */
export function heldSentence(job: WhyJob, reason: string): string | null {
  if (reason.startsWith("blackout "))
    return `Skipped: the slot falls inside the blackout window ${reason.slice(9)} (blackouts:, judged in ${job.timezone}); a slot in a blackout is never caught up afterwards.`;
  if (!reason.startsWith("paused (maintenance")) return null;
  const why = reason === "paused (maintenance)" ? "" : ` (${reason.slice(8, -1)})`;
  return `Skipped: the daemon was drained by \`cronvisor pause --all\`${why}: nothing new starts until \`cronvisor resume --all\` or the drain's --until; a slot skipped while drained is not caught up.`;
}

/** A chained run's first row: which run's end started it. */
export function chainedSentence(job: WhyJob, first: RunRow): string[] {
  if (first.trigger !== "chained" || !first.reason?.startsWith("chained after ")) return [];
  const after = first.reason.split(";")[0] as string;
  return [
    `Started by a chain: ${after} ended (its \`then:\` or \`then_on_failure:\` names ${job.name}), for the same slot.`,
  ];
}

/** A slot not yet due that one of the job's blackout windows holds. */
export function comingBlackout(job: WhyJob, slot: number): string[] {
  const window = blackoutAt(job, slot);
  if (window === null) return [];
  return [
    `The slot falls inside the blackout window ${window}: it will be skipped, and never caught up afterwards.`,
  ];
}

// `plan`'s summary as text: what `cronvisor plan` prints and `cronvisor reload` prints of what it
// applied. The plan itself is daemon/plan.ts (pure); this only lays it out.
import { printableLines } from "../core/printable.js";
import type { JobPlan, Plan } from "../daemon/plan.js";
import { when } from "./shared.js";

const BASELINE = {
  daemon: "the config the running daemon accepted",
  recorded: "the config the last daemon accepted (none runs now: applying means starting one)",
  none: "none (no daemon has run on this state dir): every job is new",
} as const;

/** A job is shown in full when it changes or applying it does something now. */
const shown = (j: JobPlan): boolean =>
  j.change !== "same" ||
  j.at_once.length > 0 ||
  j.never_again.length > 0 ||
  j.notes.length > 0 ||
  j.running_note !== null;

function jobLines(j: JobPlan): string[] {
  const keys = j.change === "changed" ? `: ${j.keys.join(", ")}` : "";
  const out = [`${j.change.padEnd(8)} ${j.name}${keys}`];
  const row = (label: string, items: readonly string[]) => {
    for (const item of items) out.push(`  ${label.padEnd(12)} ${item}`);
  };
  const slots = (list: string[]) => (list.length === 0 ? [] : [list.map(when).join(", ")]);
  if (j.change !== "same") {
    row("next before", slots(j.next_before));
    row("next after", slots(j.next_after));
  }
  row("at once", j.at_once);
  row("never again", j.never_again);
  row("note", j.notes);
  row("running", j.running_note === null ? [] : [j.running_note]);
  if (j.change === "added" || j.keys.some((k) => k === "schedule" || k === "timezone"))
    row("DST", j.dst);
  return out;
}

/** The plan as lines: baseline, each job that changes, the unchanged ones, markers left. */
export function renderPlan(p: Plan, file: string): string {
  const at = p.baseline.at === null ? "" : ` at ${when(p.baseline.at)}`;
  const out = [`baseline: ${BASELINE[p.baseline.source]}${at}`];
  for (const j of p.jobs.filter(shown)) out.push(...jobLines(j));
  const same = p.jobs.filter((j) => !shown(j)).map((j) => j.name);
  if (same.length > 0) out.push(`unchanged: ${same.join(", ")}`);
  if (p.markers_left.length > 0) {
    out.push(`markers no job of ${file} owns:`);
    for (const m of p.markers_left) {
      const rename =
        m.renamed_to === null
          ? `; list them: cronvisor markers ${m.job} -c ${file}`
          : `; likely renamed to ${m.renamed_to}: cronvisor markers ${m.job} --move-to ${m.renamed_to} -c ${file}`;
      out.push(`  ${m.job}: ${m.count} marker(s)${rename}`);
    }
  }
  const count = (c: string) => p.jobs.filter((j) => j.change === c).length;
  out.push(
    `${count("added")} added, ${count("removed")} removed, ${count("changed")} changed, ${count("same")} unchanged`,
  );
  return printableLines(out.join("\n"));
}

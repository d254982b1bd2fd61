// `GET /why/JOB?at=TIME`: what became of the slot nearest TIME, and why, in the same sentences as
// `cronvisor why JOB --at TIME` (health/why.ts makes both). TIME is ISO-8601, in the job's local
// time without an offset; without `at`, the latest slot. Every run a sentence names links to its
// page, and the schedule's neighbours to their own explanation.
import { daemonReport } from "../health/status.js";
import { explainWhy, resolveTarget, type WhyReport } from "../health/why.js";
import { parseIsoTime } from "../schedule/zone.js";
import { esc, h, notice, page, trusted, type Markup } from "./page-html.js";
import type { PageContext } from "./page-run.js";
import { whyHref } from "./page-timeline.js";
import type { HttpResponse } from "./http.js";
import type { DaemonRow, SlotFacts } from "../store/store.js";

/** A sentence, escaped, with each `run N` it names made a link to that run's page. */
function sentence(s: string): Markup {
  return trusted(esc(s).replace(/\b([Rr]un) ([0-9]+)\b/g, '<a href="/runs/$2">$1 $2</a>'));
}

function render(r: WhyReport): Markup {
  const [head, ...rest] = r.explanation;
  const around = [
    r.previous_slot ? h`<a href="${whyHref(r.job, r.previous_slot)}">← previous slot</a>` : "",
    r.next_slot ? h`<a href="${whyHref(r.job, r.next_slot)}">next slot →</a>` : "",
  ];
  const run = r.run_id === null ? "" : h` · <a href="/runs/${r.run_id}">run ${r.run_id}</a>`;
  return h`<p><a href="/">Status page</a> › <a href="/#job-${r.job}">${r.job}</a></p>
    <h1>Why: ${r.job}</h1>
    <section class="why" aria-label="Explanation">
      <p>${sentence(head ?? "")}</p>
      ${rest.map((s) => h`<p>${sentence(s)}</p>`)}
    </section>
    <p>
      Disposition <strong>${r.disposition}</strong>${run} ·
      ${around[0]}${around[0] && around[1] ? " · " : ""}${around[1]}
    </p>
    <p>
      The same from a shell: <code>cronvisor why ${r.job}${r.slot ? ` --at ${r.slot}` : ""}</code>
    </p>`;
}

export async function whyPage(
  { config, store, now }: PageContext,
  jobText: string,
  query: URLSearchParams,
): Promise<HttpResponse> {
  let name: string;
  try {
    name = decodeURIComponent(jobText);
  } catch {
    name = jobText;
  }
  const job = config.jobs.find((j) => j.name === name);
  if (!job)
    return notice(
      404,
      "no such job",
      `There is no job named "${name}" in the config the daemon runs.`,
    );
  const atText = query.get("at");
  const at = atText === null || atText === "" ? null : parseIsoTime(atText);
  if (atText && at === null)
    return notice(
      400,
      "not a time",
      `at=${JSON.stringify(atText)} is not an ISO-8601 time (e.g. 2026-03-29T02:00 in the job's time zone, or 2026-03-29T00:00Z).`,
    );
  const target = resolveTarget(job, at, now);
  let facts: SlotFacts | null = null;
  let row: DaemonRow | null = null;
  if (target.kind === "slot") facts = await store.slotFacts(job.name, target.slot);
  else row = await store.daemon();
  const daemon = daemonReport(facts?.daemon ?? row, now).state;
  const report = explainWhy({ job, target, facts, daemon, now });
  return page({ title: `cronvisor: why ${job.name}: ${report.disposition}`, body: render(report) });
}

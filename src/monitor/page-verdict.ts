// The status page's verdict: the first line of `status --check`, word for word while it is short.
// `--check` names every job in trouble (a monitoring agent shows the line, and its contract is the
// README's table); on a page of 1,000 jobs that line can run to pages, so past VERDICT_CHARS the
// page says the same things counted: the code's word, how many jobs, the first NAMES of them,
// "and N more". The list itself is the page's, problems first.
import { WARNING_WORDS, type HealthWord } from "../health/health.js";
import { nodeTrouble, unrunnable } from "../health/nodes.js";
import {
  brokenFileNotice,
  checkCode,
  checkSummary,
  type JobReport,
  type StatusReport,
} from "../health/status.js";
import { drainWarning } from "../health/drain.js";
import { EXIT } from "../core/exit.js";
import type { Config } from "../core/types.js";

/** A verdict longer than this is said in its short form (which is never longer). */
export const VERDICT_CHARS = 200;
/** How many names the short form lists of each group. */
const NAMES = 3;

/** `a, b, c and 9 more`: the first NAMES of a list (all of them when that is all). */
function few(names: readonly string[]): string {
  if (names.length <= NAMES) return names.join(", ");
  return `${names.slice(0, NAMES).join(", ")} and ${names.length - NAMES} more`;
}

/** `12 jobs failing: a, b, c and 9 more`, or with several words, each name with its word. */
function troubled(bad: readonly JobReport[]): string {
  const counts = new Map<HealthWord, number>();
  for (const j of bad) counts.set(j.health, (counts.get(j.health) ?? 0) + 1);
  if (counts.size === 1)
    return `${bad.length} jobs ${bad[0]?.health}: ${few(bad.map((j) => j.name))}`;
  const byWord = WARNING_WORDS.filter((w) => counts.has(w)).map((w) => `${counts.get(w)} ${w}`);
  return `${bad.length} jobs with problems (${byWord.join(", ")}): ${few(bad.map((j) => `${j.name} ${j.health}`))}`;
}

/** The parts of a WARNING, as checkSummary has them, each list counted. */
function warningParts(s: StatusReport): string[] {
  const d = s.daemon;
  const parts: string[] = [];
  const bad = s.jobs.filter((j) => WARNING_WORDS.includes(j.health));
  if (bad.length > NAMES) parts.push(troubled(bad));
  else parts.push(...bad.map((j) => `${j.name} ${j.health}`));
  if ((d.config_file_errors?.length ?? 0) > 0 && d.config_accepted_at !== null)
    parts.unshift(brokenFileNotice(Date.parse(d.config_accepted_at), true));
  else if (d.config_error !== null)
    parts.push("config reload failed (the daemon runs the previous config)");
  if (d.drain) parts.push(drainWarning(d.drain));
  if (d.http_error !== null) parts.push(`http endpoint down (${d.http_error})`);
  const differ = s.jobs.filter((j) => j.definition_differs_on.length > 0);
  if (differ.length > NAMES)
    parts.push(
      `${differ.length} jobs defined differently on live nodes: ${few(differ.map((j) => j.name))}`,
    );
  else
    for (const j of differ)
      parts.push(`${j.name} defined differently on ${j.definition_differs_on.join(", ")}`);
  if (s.shared) {
    const trouble = nodeTrouble(s);
    parts.push(
      trouble.length > NAMES
        ? `${trouble.length} node problems: ${few(trouble)}`
        : trouble.join(", "),
    );
  }
  return parts.filter((p) => p !== "");
}

/** The page's one-line verdict of the whole config. */
export function pageVerdict(s: StatusReport, config: Config): string {
  const full = checkSummary(s, config);
  if (full.length <= VERDICT_CHARS) return full;
  const code = checkCode(s, config);
  let short = full;
  if (code === EXIT.critical && s.shared) {
    const jobs = unrunnable(s, config);
    short = `CRITICAL: no running node may run ${jobs.length} jobs: ${few(jobs)}`;
  } else if (code === EXIT.warning) short = `WARNING: ${warningParts(s).join(", ")}`;
  // Long names (a job's, a node's) can still make it long: cut it, saying so.
  return short.length <= VERDICT_CHARS ? short : `${short.slice(0, VERDICT_CHARS - 1)}…`;
}

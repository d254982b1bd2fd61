// Jobs -> jobs.yaml text: a header on what changes under cronvisor, the file's top-level keys,
// and each job with its crontab line and notes as comments.
import YAML from "yaml";
import { formatDurationOneUnit } from "../core/duration.js";
import type { EnvMap, Format, ImportOptions, Job } from "./types.js";
import { CRON_SHELL, mailNote, tzNote, zoneOf } from "./variables.js";

const SCHEMA_COMMENT =
  " yaml-language-server: $schema=./node_modules/cronvisor/schema/jobs.schema.json";

/** The header's list of what changes when cronvisor runs the jobs instead of cron. */
const WHAT_CHANGES = [
  " What changes when cronvisor runs these jobs instead of cron:",
  " - Overlaps: cron started a job even while its previous run was still going; cronvisor skips",
  "   that slot and records it (overlap: allow on a job brings cron's behaviour back).",
  " - Output: cron mailed it; cronvisor keeps each run's output in its log (cronvisor logs JOB)",
  "   and reports failures through alerts:.",
  " - Environment: both start jobs with a minimal one. cron set SHELL, HOME, LOGNAME, USER and",
  "   PATH=/usr/bin:/bin, plus the crontab's variables; cronvisor passes PATH, HOME, USER,",
  "   LOGNAME, SHELL, LANG and TZ, plus env:. Put PATH in env: if a command needs cron's.",
  " - Working directory: cron started jobs in HOME; cronvisor starts them in cwd: (set below",
  "   where the crontab set HOME, otherwise the directory of this file).",
  " - Missed runs: cron never ran what came due while it was down; cronvisor runs a missed slot",
  "   once afterwards (catchup: once, within catchup_window: 6h). catchup: skip is cron's way.",
  " - DST: cronvisor runs a job that has one fixed time exactly once on the days the clocks",
  "   change; cron implementations differ (some skip it, some run it twice).",
  " - Commands run as cron ran them, with `shell -c COMMAND`; what was rewritten is noted at",
  "   each job.",
];

/** Variables that only configured cron: dropped with a warning unless a command uses them. */
const CRON_ONLY = ["MAILFROM", "CONTENT_TYPE", "CONTENT_TRANSFER_ENCODING", "MLS_LEVEL"];

/** Comment text with control characters made visible: a YAML comment cannot hold them. */
const visible = (s: string) =>
  [...s]
    .map((c) => {
      const code = c.charCodeAt(0);
      const control = (code < 0x20 && c !== "\t") || code === 0x7f;
      return control ? `\\x${code.toString(16).padStart(2, "0")}` : c;
    })
    .join("");

/** A note as comment lines of at most ~100 columns; continuation lines are indented. */
function wrap(note: string, width = 94): string[] {
  const out: string[] = [];
  let line = "";
  for (const word of note.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      out.push(line);
      line = `  ${word}`;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  out.push(line);
  return out.map((l) => ` ${l}`);
}

/** The header comment: where the file came from, its format, and what changes. */
function header(globalEnv: EnvMap, format: Format, opts: ImportOptions): string[] {
  const lines = [
    SCHEMA_COMMENT,
    ` Imported from ${opts.file} by \`cronvisor import-crontab\`. Review it, then run \`cronvisor validate\`.`,
    format.system
      ? ` format: system crontab (a user column before the command), detected because ${format.why}`
      : ` format: user crontab (five time fields, then the command), detected because ${format.why}`,
    "",
    ...WHAT_CHANGES,
  ];
  const mailto = globalEnv.get("MAILTO");
  if (mailto) lines.push("", ...wrap(mailNote(mailto.value)));
  if (zoneOf(globalEnv) !== null && !globalEnv.has("CRON_TZ")) {
    lines.push("", ...wrap(tzNote(globalEnv)));
  }
  return lines;
}

export function render(
  jobs: Job[],
  globalEnv: EnvMap,
  format: Format,
  forEnv: (name: string) => boolean,
  trailing: string[],
  opts: ImportOptions,
  warnings: string[],
): string {
  const head = header(globalEnv, format, opts);
  for (const dropped of CRON_ONLY) {
    const v = globalEnv.get(dropped);
    if (v && !forEnv(dropped)) {
      warnings.push(`line ${v.line}: ${dropped} only configured cron itself; not imported`);
    }
  }

  const doc = new YAML.Document({});
  doc.commentBefore = head.map(visible).join("\n");
  const top = doc.contents as YAML.YAMLMap;
  top.add(new YAML.Pair("shell", globalEnv.get("SHELL")?.value ?? CRON_SHELL));
  const globalZone = zoneOf(globalEnv);
  if (globalZone !== null) top.add(new YAML.Pair("timezone", globalZone));
  const envEntries = [...globalEnv].filter(([k]) => forEnv(k)).map(([k, v]) => [k, v.value]);
  if (envEntries.length > 0)
    top.add(new YAML.Pair("env", doc.createNode(Object.fromEntries(envEntries))));

  const jobsMap = new YAML.YAMLMap();
  for (const job of jobs) jobsMap.add(jobPair(doc, job, jobsMap.items.length > 0));
  const jobsKey = new YAML.Scalar("jobs");
  jobsKey.spaceBefore = true;
  top.add(new YAML.Pair(jobsKey, jobsMap));
  if (trailing.length > 0) doc.comment = trailing.map(visible).join("\n");
  return doc.toString({ lineWidth: 0 });
}

/** One job: its name with the comments and notes before it, then its keys. */
function jobPair(doc: YAML.Document, job: Job, spaceBefore: boolean): YAML.Pair {
  const key = new YAML.Scalar(job.name);
  const comment = [...job.comments, ` line ${job.line}: ${job.original}`];
  comment.push(...job.notes.flatMap((n) => wrap(n)));
  key.commentBefore = comment.map(visible).join("\n");
  key.spaceBefore = spaceBefore;
  const value = new YAML.YAMLMap();
  const set = (k: string, v: unknown) => value.add(new YAML.Pair(k, v));
  const schedule = new YAML.Scalar(job.schedule);
  schedule.type = "QUOTE_DOUBLE"; // `*/5 * * * *` unquoted would be a YAML alias
  set("schedule", schedule);
  if (job.user !== null) set("user", job.user);
  set(
    "command",
    typeof job.command === "string" ? job.command : doc.createNode(job.command, { flow: true }),
  );
  if (job.cwd !== null) set("cwd", job.cwd);
  if (job.timezone !== null) set("timezone", job.timezone);
  if (Object.keys(job.env).length > 0) set("env", doc.createNode(job.env));
  if (job.overlap !== null) set("overlap", job.overlap);
  if (job.locks.length > 0) set("locks", doc.createNode(job.locks, { flow: true }));
  if (job.leftovers !== null) set("leftovers", job.leftovers);
  if (job.timeoutMs !== null) set("timeout", formatDurationOneUnit(job.timeoutMs));
  if (job.killGraceMs !== null) set("kill_grace", formatDurationOneUnit(job.killGraceMs));
  if (job.jitterMs !== null) set("jitter", formatDurationOneUnit(job.jitterMs));
  return new YAML.Pair(key, value);
}

// `cronvisor pause` and `cronvisor resume`: a flag in the store, so it survives daemon restarts.
// With --all, the drain: one row in the store that every daemon (node) reads before it starts
// anything, ended by `resume --all` or by its own --until.
import { CliError, EXIT, findJob, load, openStore, out, printable } from "./shared.js";

interface PauseOpts {
  config?: string;
  all?: boolean;
  until?: string;
  reason?: string;
}

export const pause = (name: string | undefined, o: PauseOpts): Promise<void> =>
  o.all ? drain(name, o) : setPaused(named(name, o, "pause"), o, true);

export const resume = (name: string | undefined, o: PauseOpts): Promise<void> =>
  o.all ? undrain(name, o) : setPaused(named(name, o, "resume"), o, false);

/** A job's pause takes its name and none of --all's options. */
function named(name: string | undefined, o: PauseOpts, verb: string): string {
  if (name === undefined)
    throw new CliError(`${verb}: name a job, or give --all (every job)`, EXIT.usage);
  if (o.until !== undefined || o.reason !== undefined)
    throw new CliError(`${verb}: --until and --reason go with --all`, EXIT.usage);
  return name;
}

async function setPaused(name: string, o: { config?: string }, paused: boolean): Promise<void> {
  const config = await load(o.config);
  const job = findJob(config, name);
  const store = await openStore(config, true);
  await store.setPaused(name, paused, Date.now());
  await store.close();
  // A job its config pauses is not resumed by clearing the store's flag: never say it is.
  if (!paused && job.paused)
    out(
      `${name} stays paused: its entry in ${config.file} (line ${job.line}) says paused: true; remove that, then \`cronvisor reload -c ${config.file}\` (the pause set by \`cronvisor pause\` is lifted)`,
    );
  else out(`${name} ${paused ? "paused" : "resumed"}`);
}

async function drain(name: string | undefined, o: PauseOpts): Promise<void> {
  if (name !== undefined) throw new CliError("pause: give a job or --all, not both", EXIT.usage);
  const config = await load(o.config);
  const now = Date.now();
  const until = o.until === undefined ? null : await untilTime(o.until, config.timezone, now);
  const reason = o.reason === undefined ? null : o.reason.trim();
  if (reason !== null && (reason === "" || reason.length > 200))
    throw new CliError("pause --all: --reason takes a text of 1 to 200 characters", EXIT.usage);
  const store = await openStore(config, true);
  try {
    await store.setDrain({ since: now, until, reason }, now);
  } finally {
    await store.close();
  }
  const till =
    until === null ? "until `cronvisor resume --all`" : `until ${new Date(until).toISOString()}`;
  out(
    `drained ${till}: nothing new starts, running runs finish, slots are recorded skipped${reason === null ? "" : ` (maintenance: ${printable(reason)})`}`,
  );
}

async function undrain(name: string | undefined, o: PauseOpts): Promise<void> {
  if (name !== undefined) throw new CliError("resume: give a job or --all, not both", EXIT.usage);
  if (o.until !== undefined || o.reason !== undefined)
    throw new CliError("resume --all takes no --until or --reason", EXIT.usage);
  const config = await load(o.config);
  const store = await openStore(config, true);
  try {
    await store.setDrain(null, Date.now());
  } finally {
    await store.close();
  }
  out("drain ended: slots start again (jobs paused one by one stay paused)");
}

/**
 * --until: a duration from now (`2h`), or an ISO-8601 time; one without an offset is a time of
 * the config's time zone. It must lie ahead.
 */
async function untilTime(text: string, zone: string, now: number): Promise<number> {
  const bad = (why: string) =>
    new CliError(
      `--until ${JSON.stringify(text)}: ${why} (e.g. --until 2h, --until 2026-12-27T06:00, --until 2026-12-27T05:00Z)`,
      EXIT.usage,
    );
  let at: number | null;
  if (/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/.test(text.trim())) {
    const { parseDuration } = await import("../core/duration.js");
    at = now + parseDuration(text.trim());
  } else {
    const { parseIsoTime, localInstants } = await import("../schedule/zone.js");
    const t = parseIsoTime(text);
    if (t === null) throw bad("not a duration or an ISO-8601 time");
    const w = t.wall;
    if (t.offsetMs !== null)
      at = Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second, w.ms) - t.offsetMs;
    else at = localInstants(w, zone)[0] ?? null;
    if (at === null) throw bad(`no such local time in ${zone} (a DST gap)`);
  }
  if (at <= now) throw bad("that time has passed");
  return at;
}

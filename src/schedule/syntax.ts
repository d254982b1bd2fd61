// A schedule as written in jobs.yaml -> the pattern croner gets. Pure and clock-free, so that
// config validation and the JSON Schema (the macro list) share one definition with the scheduler.
import { Cron } from "croner";
import { CRON_OPTIONS } from "./cron-options.js";

export const MACROS: Readonly<Record<string, string | null>> = {
  "@yearly": "0 0 1 1 *",
  "@annually": "0 0 1 1 *",
  "@monthly": "0 0 1 * *",
  "@weekly": "0 0 * * 0",
  "@daily": "0 0 * * *",
  "@midnight": "0 0 * * *",
  "@hourly": "0 * * * *",
  "@reboot": null,
};

// Any fixed instant will do: with years wildcarded, an expression that never fires after it
// never fires at all. Fixed, so that validation does not read the clock.
const NEVER_FIRES_PROBE = new Date(Date.UTC(2000, 0, 1));
const CRON_FIELDS = ["second", "minute", "hour", "day-of-month", "month", "day-of-week"];

/**
 * Checked schedules: many jobs share one, and croner takes ~0.7 ms to check each. An error is
 * kept too and rethrown each time, so a config with many copies of one bad schedule stays cheap.
 */
const scheduleMemo = new Map<string, string | null | Error>();

/**
 * A schedule as written -> the pattern croner gets (macros expanded, whitespace single), or
 * null for `@reboot`. Throws an Error whose message is meant for the user.
 */
export function parseSchedule(schedule: string): string | null {
  let result = scheduleMemo.get(schedule);
  if (result === undefined) {
    try {
      result = parseScheduleOnce(schedule);
    } catch (e) {
      result = e as Error;
    }
    scheduleMemo.set(schedule, result);
  }
  if (result instanceof Error) throw result;
  return result;
}

function parseScheduleOnce(schedule: string): string | null {
  const text = schedule.trim();
  const quoted = JSON.stringify(schedule);
  if (text === "") throw new Error("schedule is empty");
  if (text.startsWith("@")) {
    const pattern = Object.hasOwn(MACROS, text) ? MACROS[text] : undefined;
    if (pattern === undefined) {
      throw new Error(`schedule ${quoted}: unknown macro (use ${Object.keys(MACROS).join(" ")})`);
    }
    return pattern;
  }
  const fields = text.split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    throw new Error(
      `schedule ${quoted} has ${fields.length} field${fields.length === 1 ? "" : "s"}; ` +
        "use 5 (minute hour day month weekday) or 6 (second first)",
    );
  }
  const pattern = fields.join(" ");
  let cron: Cron;
  try {
    // UTC as an offset, not as `timezone: "UTC"`: croner reads a named zone through Intl, and a
    // check of every schedule would load ICU for a daemon whose jobs never need it.
    cron = new Cron(pattern, { ...CRON_OPTIONS, utcOffset: 0, paused: true });
  } catch (e) {
    throw new Error(`schedule ${quoted}: ${cronMessage(e)}`, { cause: e });
  }
  if (cron.nextRun(NEVER_FIRES_PROBE) === null) throw new Error(`schedule ${quoted} never fires`);
  return pattern;
}

/** croner's messages, without its class prefix and in the field names cron users know. */
function cronMessage(e: unknown): string {
  const raw = e instanceof Error ? e.message : String(e);
  const text = raw
    .replace(/^Cron\w*: /, "")
    .replace(/\.$/, "")
    .replace(/configuration entry (\d) \((.*)\)/, (_m, i: string, part: string) => {
      return `${CRON_FIELDS[Number(i)] ?? "field"} field "${part}"`;
    })
    .replace("dayOfWeek", "day-of-week")
    .replace(/\bfor day:/, "for day-of-month:");
  return text.charAt(0).toLowerCase() + text.slice(1);
}

// The five time fields and the @ specifiers -> a croner pattern with the same meaning
// (cronie entry.c get_list / get_range / get_number).
import { CronPattern } from "croner";
import { LineError } from "./types.js";

interface FieldSpec {
  what: string;
  low: number;
  high: number;
  names?: readonly string[];
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

const FIELDS: readonly FieldSpec[] = [
  { what: "minute", low: 0, high: 59 },
  { what: "hour", low: 0, high: 23 },
  { what: "day-of-month", low: 1, high: 31 },
  { what: "month", low: 1, high: 12, names: MONTHS },
  // 0-7: cron accepts 7 for Sunday and folds it onto 0 after parsing.
  { what: "day-of-week", low: 0, high: 7, names: DAYS },
];

/** cron's @ specifiers, spelled as cron wants them (it compares case-sensitively). */
export const MACROS = new Set([
  "reboot",
  "yearly",
  "annually",
  "monthly",
  "weekly",
  "daily",
  "midnight",
  "hourly",
]);

/** The values a field selects. Throws LineError with cron's verdict and a hint. */
function parseField(text: string, spec: FieldSpec): Set<number> {
  const bad = (why: string) => new LineError(`bad ${spec.what} "${text}": ${why}`);
  const number = (tok: string): number => {
    let n: number;
    if (/^[0-9]+$/.test(tok)) n = Number(tok);
    else if (spec.names && /^[A-Za-z]+$/.test(tok)) {
      n = spec.names.indexOf(tok.toLowerCase());
      if (n < 0) {
        const hint = tok.length > 3 ? " (cron takes the first three letters only)" : "";
        throw bad(`unknown name "${tok}"${hint}`);
      }
      n += spec.low;
    } else if (/^[LW#?]|[LW#?]$|#/.test(tok)) {
      throw bad(`"${tok}": L, W, # and ? are not crontab syntax`);
    } else throw bad(`"${tok}" is not a number${spec.names ? " or a name" : ""}`);
    if (n < spec.low || n > spec.high) throw bad(`${n} is out of range ${spec.low}-${spec.high}`);
    return n;
  };
  const values = new Set<number>();
  for (const element of text.split(",")) {
    if (element === "") throw bad("empty list element");
    const m = /^(?:(\*)|([^-/]+)(?:-([^-/]+))?)(?:\/(.*))?$/.exec(element);
    if (!m) throw bad(`cannot read "${element}"`);
    const [, star, from, to, stepText] = m;
    let step = 1;
    if (stepText !== undefined) {
      if (!/^[0-9]+$/.test(stepText) || Number(stepText) === 0) {
        throw bad(`step "${stepText}" must be a whole number above 0`);
      }
      step = Number(stepText);
    }
    let lo = spec.low;
    let hi = spec.high;
    if (!star) {
      lo = number(from as string);
      hi = to === undefined ? lo : number(to);
      if (lo > hi)
        throw bad(`range ${element} runs backwards (cron rejects it; write it as a list)`);
      if (to === undefined && stepText !== undefined) {
        // cronie rejects it, Debian's cron silently drops the step, croniter reads N-MAX/S.
        throw bad(
          `"${element}" means different things to different crons; write ${from}-${spec.what === "day-of-week" ? 7 : spec.high}/${step} or ${from}`,
        );
      }
    }
    for (let v = lo; v <= hi; v += step) values.add(spec.what === "day-of-week" && v === 7 ? 0 : v);
  }
  return values;
}

export interface Schedule {
  /** What cronvisor gets: a croner 11 pattern or a macro. */
  pattern: string;
  /** One fixed minute and hour (croner's isFixedTime): DST moves it instead of skipping it. */
  fixedTime: boolean;
  minutes: Set<number>;
  hours: Set<number>;
  /** cron accepts a schedule that can never fire (`0 0 30 2 *`); cronvisor's config does not. */
  never: boolean;
  notes: string[];
}

const range = (lo: number, hi: number) => Array.from({ length: hi - lo + 1 }, (_, i) => lo + i);
const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** What cron makes of the five fields: croner's reading of a pattern is checked against it. */
interface CronReading {
  minutes: Set<number>;
  hours: Set<number>;
  months: Set<number>;
  /** cron ANDs the day fields (one of them starts with `*`) instead of ORing them. */
  and: boolean;
  /** Whether cron runs on day-of-month d that is weekday w. */
  day: (d: number, w: number) => boolean;
  fullDom: boolean;
  fullDow: boolean;
  never: boolean;
}

function readCron(fields: string[], sets: Set<number>[]): CronReading {
  const [minutes, hours, doms, months, dows] = sets as [
    Set<number>,
    Set<number>,
    Set<number>,
    Set<number>,
    Set<number>,
  ];
  const and = (fields[2] as string).startsWith("*") || (fields[4] as string).startsWith("*");
  const day = (d: number, w: number) =>
    and ? doms.has(d) && dows.has(w) : doms.has(d) || dows.has(w);
  const never = !range(1, 12).some(
    (m) =>
      months.has(m) &&
      range(1, DAYS_IN_MONTH[m - 1] as number).some((d) => range(0, 6).some((w) => day(d, w))),
  );
  const fullDom = doms.size === 31;
  const fullDow = dows.size === 7;
  return { minutes, hours, months, and, day, fullDom, fullDow, never };
}

/**
 * Five crontab fields -> a croner pattern with the same meaning.
 *
 * croner reads `7`, names and ranges of names as cron does, so the fields are kept as written
 * when croner agrees on every value; otherwise (a step larger than the field, say) they are
 * written out as plain numbers. The day fields need care: cron ANDs day-of-month and
 * day-of-week when either field *starts with* `*` (`*\/2`, `*,5`), and ORs them otherwise;
 * croner ANDs only when a field *is* `*`, or when day-of-week carries its `+` modifier.
 * The result is checked against croner's own reading of it, value by value.
 */
export function convertFields(fields: string[]): Schedule {
  const sets = fields.map((f, i) => parseField(f, FIELDS[i] as FieldSpec));
  const cron = readCron(fields, sets);

  const written = attempt(fields, cron);
  if (written) return written;

  // Plain numbers: `*` for a complete field, else runs and single values.
  const plain = sets.map((set, i) => {
    const spec = FIELDS[i] as FieldSpec;
    const top = spec.what === "day-of-week" ? 6 : spec.high;
    if (set.size === top - spec.low + 1) return "*";
    return compress([...set].sort((a, b) => a - b));
  });
  // A day field written out as `*` turns cron's OR into croner's AND: when cron ORs and one
  // side is complete, every day matches, which `*` `*` says.
  if (!cron.and && (plain[2] === "*" || plain[4] === "*")) plain[2] = plain[4] = "*";
  const normalised = attempt(plain, cron);
  if (!normalised) throw new LineError(`croner cannot express "${fields.join(" ")}" exactly`);
  normalised.notes.unshift(`schedule written out as "${normalised.pattern}" for croner`);
  return normalised;
}

/** The day fields for croner: where cron ANDs them, croner must be told to (`+`) or not need to. */
function dayFields(dom: string, dow: string, cron: CronReading, notes: string[]): [string, string] {
  if (!cron.and || dom === "*" || dow === "*") return [dom, dow];
  if (cron.fullDom) return ["*", dow];
  if (cron.fullDow) return [dom, "*"];
  notes.push(
    `"+${dow}" makes both day fields have to match, as cron does when one of them starts with "*"`,
  );
  return [dom, `+${dow}`];
}

/** The fields as a croner pattern, if croner reads them exactly as cron does; else null. */
function attempt(texts: string[], cron: CronReading): Schedule | null {
  const notes: string[] = [];
  const [dom, dow] = dayFields(texts[2] as string, texts[4] as string, cron, notes);
  const pattern = [texts[0], texts[1], dom, texts[3], dow].join(" ");
  let p: CronPattern;
  try {
    p = new CronPattern(pattern, undefined, { mode: "5-or-6-parts" });
  } catch {
    return null;
  }
  if (!cronerAgrees(p, cron)) return null;
  const { minutes, hours, never } = cron;
  return { pattern, notes, fixedTime: p.isFixedTime, minutes, hours, never };
}

function cronerAgrees(p: CronPattern, cron: CronReading): boolean {
  const same = (arr: number[], set: Set<number>, offset: number) =>
    arr.every((v, i) => Boolean(v) === set.has(i + offset));
  const cronerDay = (d: number, w: number) => {
    const dm = Boolean(p.day[d - 1]);
    const wm = Boolean(p.dayOfWeek[w]);
    if (p.starDOW) return dm;
    return p.useAndLogic || p.starDOM ? dm && wm : dm || wm;
  };
  const daysAgree = range(1, 31).every((d) =>
    range(0, 6).every((w) => cron.day(d, w) === cronerDay(d, w)),
  );
  return (
    same(p.minute, cron.minutes, 0) &&
    same(p.hour, cron.hours, 0) &&
    same(p.month, cron.months, 1) &&
    daysAgree &&
    !p.lastDayOfMonth &&
    !p.lastWeekday
  );
}

/** [1,2,3,5] -> "1-3,5" */
function compress(values: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < values.length;) {
    let j = i;
    while (j + 1 < values.length && (values[j + 1] as number) === (values[j] as number) + 1) j++;
    out.push(j - i >= 2 ? `${values[i]}-${values[j]}` : values.slice(i, j + 1).join(","));
    i = j + 1;
  }
  return out.join(",");
}

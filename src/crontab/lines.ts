// Lines: what each crontab line is (blank, comment, variable, job, or bad), whether the file is
// a user or a system crontab, and a job line's user column and command.
import { MACROS } from "./fields.js";
import { splitPercent } from "./shell.js";
import { parseEnvLine } from "./variables.js";
import { LineError } from "./types.js";
import type { CronLine, Entry, Format, ImportOptions } from "./types.js";

/** One line of the crontab; `entry` becomes `job` (or `bad`) once the format is known. */
export type LineItem =
  | { kind: "comment"; line: number; text: string }
  | { kind: "blank"; line: number }
  | { kind: "env"; line: number; name: string; value: string }
  | { kind: "entry"; entry: Entry }
  | { kind: "bad"; line: number; text: string; message: string }
  | { kind: "job"; job: CronLine };

/** The file's lines, without the final newline's empty one. Warns about CRLF line ends. */
export function splitLines(text: string, warnings: string[]): string[] {
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  if (lines.some((l) => l.endsWith("\r"))) {
    warnings.push(
      "the file has Windows (CRLF) line endings: the \\r is dropped; cron would have kept it in commands (and they would most likely have failed)",
    );
  }
  return lines;
}

/** What line `line` (1-based) is; job lines are split into time fields and the rest. */
export function classifyLine(raw: string, line: number): LineItem {
  const t = raw.replace(/\r$/, "");
  const body = t.replace(/^[ \t]+/, "");
  if (body === "") return { kind: "blank", line };
  if (body.startsWith("#")) return { kind: "comment", line, text: body.slice(1) };
  const env = parseEnvLine(body);
  if (env) {
    if (env.name === "") return { kind: "bad", line, text: t, message: "empty variable name" };
    return { kind: "env", line, ...env };
  }
  try {
    return { kind: "entry", entry: splitEntry(line, t) };
  } catch (e) {
    if (!(e instanceof LineError)) throw e;
    return { kind: "bad", line, text: t, message: e.message };
  }
}

/** The user column and the command, cut at `%`, now that the format is known. */
export function cutCommand(item: LineItem, system: boolean): LineItem {
  if (item.kind !== "entry") return item;
  const e = item.entry;
  let rest = e.rest;
  let user: string | null = null;
  if (system) {
    const m = /^(\S+)[ \t]+(.*)$/s.exec(rest);
    if (!m || (m[2] as string).trim() === "") {
      return {
        kind: "bad",
        line: e.line,
        text: e.text,
        message: "no command after the user column",
      };
    }
    user = m[1] as string;
    rest = m[2] as string;
  }
  const split = splitPercent(rest);
  // Blanks around a command mean nothing to the shell; an escaped trailing blank does.
  const command = split.command.replace(/^[ \t]+/, "").replace(/(?<!\\)[ \t]+$/, "");
  return { kind: "job", job: { entry: e, user, command, stdin: split.stdin } };
}

/** Users that make a sixth column read as a user column (and are unlikely command names). */
const KNOWN_USERS = new Set([
  "root", "www-data", "nobody", "daemon", "postgres", "mysql", "nginx", "apache", "redis", "http",
  "bin", "sys", "smmsp", "operator", "uucp",
]); // prettier-ignore
const USERISH = /^[a-z_][a-z0-9_.-]*\$?$/i;
/** Sixth fields that are commands, not users, however user-like they look. */
const COMMON_COMMANDS = new Set([
  "cd", "echo", "test", "true", "sleep", "cat", "date", "find", "rm", "mv", "cp", "tar", "gzip",
  "rsync", "curl", "wget", "php", "python", "python3", "perl", "ruby", "node", "sh", "bash", "env",
  "nice", "ionice", "flock", "timeout", "chronic", "sudo", "su", "run-parts", "mail", "git", "make",
  "npm", "docker", "mysqldump", "pg_dump", "certbot", "logrotate", "touch", "mkdir", "tr", "wp",
]); // prettier-ignore

/** The time part of a job line, which reads the same in both formats. */
function splitEntry(line: number, text: string): Entry {
  let t = text.replace(/^[ \t]+/, "");
  const dontLog = t.startsWith("-");
  if (dontLog) t = t.slice(1);
  const entry = {
    line,
    text,
    dontLog,
    macro: null as string | null,
    fields: [] as string[],
    rest: "",
  };
  if (t.startsWith("@")) {
    const m = /^@(\S*)[ \t]*(.*)$/s.exec(t) as RegExpExecArray;
    if (!MACROS.has(m[1] as string)) {
      throw new LineError(
        `unknown time specifier "@${m[1]}" (cron knows @${[...MACROS].join(" @")}, in lower case)`,
      );
    }
    entry.macro = m[1] as string;
    entry.rest = m[2] as string;
  } else {
    const m = /^(\S+)[ \t]+(\S+)[ \t]+(\S+)[ \t]+(\S+)[ \t]+(\S+)(?:[ \t]+(.*))?$/s.exec(t);
    if (!m) {
      const hint = /^export[ \t]/.test(t) ? ' (write "NAME=value" without "export")' : "";
      throw new LineError(`expected five time fields and a command, or NAME=value${hint}`);
    }
    entry.fields = m.slice(1, 6) as string[];
    entry.rest = m[6] ?? "";
  }
  if (entry.rest.trim() === "") throw new LineError("no command after the time fields");
  // cron's "catch a common typo" check: a sixth time field (seconds) is not crontab syntax.
  if (entry.rest.startsWith("*")) {
    throw new LineError('a "*" where the command should start: cron has five time fields, not six');
  }
  return entry;
}

export function detectFormat(
  entries: Entry[],
  opts: ImportOptions,
): { format: Format; warning?: string } {
  if (opts.system) return { format: { system: true, why: "--system was given" } };
  if (opts.file === "/etc/crontab" || opts.file.startsWith("/etc/cron.d/")) {
    return { format: { system: true, why: `the file is ${opts.file}` } };
  }
  if (entries.length === 0) return { format: { system: false, why: "it has no job lines" } };
  const sixth = entries.map((e) => {
    const m = /^(\S+)([ \t]+\S)?/.exec(e.rest) as RegExpExecArray;
    return { entry: e, word: m[1] as string, more: m[2] !== undefined };
  });
  const notUser = sixth.find(
    (s) => !s.more || !USERISH.test(s.word) || COMMON_COMMANDS.has(s.word),
  );
  if (notUser) {
    const what = !USERISH.test(notUser.word)
      ? "cannot be a user name"
      : COMMON_COMMANDS.has(notUser.word)
        ? "is a command"
        : "has no command after it";
    return {
      format: {
        system: false,
        why: `line ${notUser.entry.line}'s sixth field "${notUser.word}" ${what}`,
      },
    };
  }
  const known = [...new Set(sixth.map((s) => s.word as string).filter((w) => KNOWN_USERS.has(w)))];
  if (known.length > 0) {
    return {
      format: {
        system: true,
        why: `every job line names a user in column 6 (${known.join(", ")})`,
      },
    };
  }
  const words = [...new Set(sixth.map((s) => s.word as string))].join(", ");
  return {
    format: { system: false, why: `no job line names a well-known user in column 6` },
    warning: `every job line's sixth field (${words}) could be a user name: if this is a system crontab, import it with --system`,
  };
}

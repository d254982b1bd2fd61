// The importer's public types, the records its stages hand each other, and the one error it
// throws internally. Words: a crontab *line* becomes a *job*; its schedule's instants are *slots*.

export interface ImportOptions {
  /** Shown in the output header and used to recognise /etc/crontab and /etc/cron.d/*. */
  file: string;
  /** The file has a user column (system crontab, /etc/cron.d). Otherwise it is detected. */
  system?: boolean;
  /** Turn unparseable lines into comments and warnings instead of errors. */
  skipInvalid?: boolean;
}

export interface ImportError {
  /** 1-based line number in the crontab. */
  line: number;
  /** The whole message, starting with `line N: `. */
  message: string;
}

export interface ImportResult {
  /** jobs.yaml text. Produced even when there are errors (bad lines are comments in it). */
  yaml: string;
  errors: ImportError[];
  /** Each starts with `line N: ` when it is about one line. */
  warnings: string[];
}

/** An unparseable line. The message does not yet carry the `line N: ` prefix. */
export class LineError extends Error {}

/** The time part of a job line, which reads the same in both formats. */
export interface Entry {
  line: number;
  text: string;
  dontLog: boolean;
  macro: string | null;
  fields: string[];
  /** Everything after the time fields: `[user] command`. */
  rest: string;
}

/** A job line, its user column and its command cut at `%`. */
export interface CronLine {
  entry: Entry;
  user: string | null;
  command: string;
  stdin: string | null;
}

/** User or system crontab, and why the import thinks so (shown in the output header). */
export interface Format {
  system: boolean;
  why: string;
}

/** The variables in force at a line, with the line that set each. */
export type EnvMap = Map<string, { value: string; line: number }>;

/** One job of the output, before it is rendered as YAML. */
export interface Job {
  line: number;
  /** The crontab line as written. */
  original: string;
  name: string;
  comments: string[];
  notes: string[];
  schedule: string;
  user: string | null;
  command: string | string[];
  cwd: string | null;
  timezone: string | null;
  env: Record<string, string>;
  overlap: "skip" | "queue" | null;
  /** Named locks: a flock file several lines share (docs/locks.md). */
  locks: string[];
  /** `keep` for a line that ends in `&`: it means to leave something running. */
  leftovers: "keep" | null;
  timeoutMs: number | null;
  killGraceMs: number | null;
  jitterMs: number | null;
}

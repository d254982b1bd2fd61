// The command part of a job line: cron's `%` (do_command.c) and enough of the shell's word
// and operator syntax to find wrappers, name the job and feed it cron's stdin text.

/**
 * Split a cron command at its first unescaped `%`, exactly as do_command.c does. Before it,
 * `\%` becomes `%` and every other backslash stays. After it is the job's stdin: each further
 * unescaped `%` becomes a newline, `\%` becomes `%`, and a newline is added at the end unless
 * the text already ends with one. An empty rest means no stdin at all.
 */
export function splitPercent(raw: string): { command: string; stdin: string | null } {
  let command = "";
  let escaped = false;
  let i = 0;
  for (; i < raw.length; i++) {
    const c = raw[i] as string;
    if (escaped) {
      escaped = false;
      if (c === "%") command = command.slice(0, -1) + "%";
      else command += c;
      continue;
    }
    if (c === "%") break;
    if (c === "\\") escaped = true;
    command += c;
  }
  const rest = raw.slice(i + 1);
  if (i >= raw.length || rest === "") return { command, stdin: null };
  let stdin = "";
  let pending = false; // a backslash not yet written
  let needNewline = false;
  for (const ch of rest) {
    let c = ch;
    if (pending) {
      if (c !== "%") stdin += "\\";
    } else if (c === "%") c = "\n";
    pending = c === "\\";
    if (!pending) {
      stdin += c;
      needNewline = c !== "\n";
    }
  }
  if (pending) stdin += "\\";
  if (needNewline) stdin += "\n";
  return { command, stdin };
}

export type Token =
  | {
      kind: "word";
      start: number;
      end: number;
      /** null: expands at run time */ value: string | null;
    }
  | { kind: "op"; start: number; end: number; op: string };

/**
 * Shell words and operators of one command line, enough to find wrappers and list operators.
 * `complete` is false for an unterminated quote or substitution.
 */
export function tokenize(s: string): { tokens: Token[]; complete: boolean } {
  const tokens: Token[] = [];
  const n = s.length;
  let i = 0;
  while (i < n) {
    const c = s[i] as string;
    if (c === " " || c === "\t") {
      i++;
      continue;
    }
    if (c === "#") break;
    const rest = s.slice(i);
    const op =
      /^(?:[0-9]*(?:<<<|<<-|<<|>>|<&|>&|<>|>\||<|>)|&>>|&>)/.exec(rest) ??
      /^(?:&&|\|\||;;|\|&|[;&|()\n])/.exec(rest);
    if (op) {
      const text = op[0];
      tokens.push({
        kind: "op",
        start: i,
        end: i + text.length,
        op: /[<>]/.test(text) ? "redirect" : text,
      });
      i += text.length;
      continue;
    }
    const start = i;
    let value: string | null = "";
    const add = (t: string) => {
      if (value !== null) value += t;
    };
    while (i < n) {
      const ch = s[i] as string;
      if (" \t\n;&|()<>".includes(ch)) break;
      if (ch === "'") {
        const j = s.indexOf("'", i + 1);
        if (j < 0) return { tokens, complete: false };
        add(s.slice(i + 1, j));
        i = j + 1;
      } else if (ch === '"') {
        const j = scanDoubleQuoted(s, i + 1);
        if (j < 0) return { tokens, complete: false };
        const inner = s.slice(i + 1, j);
        if (/[$`\\]/.test(inner)) value = null;
        else add(inner);
        i = j + 1;
      } else if (ch === "\\") {
        add(s[i + 1] ?? "\\");
        i += 2;
      } else if (ch === "$" || ch === "`") {
        const j = scanExpansion(s, i);
        if (j < 0) return { tokens, complete: false };
        value = null;
        i = j;
      } else {
        if ("*?[".includes(ch) || (ch === "~" && i === start)) value = null;
        add(ch);
        i++;
      }
    }
    tokens.push({ kind: "word", start, end: Math.min(i, n), value });
  }
  return { tokens, complete: true };
}

/** Index of the closing `"` of a double-quoted string that starts at i, or -1. */
function scanDoubleQuoted(s: string, i: number): number {
  while (i < s.length) {
    const c = s[i];
    if (c === "\\") i += 2;
    else if (c === '"') return i;
    else if (c === "$" || c === "`") {
      const j = scanExpansion(s, i);
      if (j < 0) return -1;
      i = j;
    } else i++;
  }
  return -1;
}

/** End (exclusive) of the `$...` or backquote expansion starting at i, or -1. */
function scanExpansion(s: string, i: number): number {
  if (s[i] === "`") {
    for (let j = i + 1; j < s.length; j++) {
      if (s[j] === "\\") j++;
      else if (s[j] === "`") return j + 1;
    }
    return -1;
  }
  const next = s[i + 1];
  if (next === "{") {
    const j = s.indexOf("}", i + 2);
    return j < 0 ? -1 : j + 1;
  }
  if (next === "(") {
    let depth = 1;
    for (let j = i + 2; j < s.length; j++) {
      const c = s[j];
      if (c === "\\") j++;
      else if (c === "'") {
        j = s.indexOf("'", j + 1);
        if (j < 0) return -1;
      } else if (c === '"') {
        j = scanDoubleQuoted(s, j + 1);
        if (j < 0) return -1;
      } else if (c === "(") depth++;
      else if (c === ")" && --depth === 0) return j + 1;
    }
    return -1;
  }
  const name = /^[A-Za-z_][A-Za-z0-9_]*|^[0-9@*#?$!-]/.exec(s.slice(i + 1));
  return i + 1 + (name ? name[0].length : 0);
}

const RESERVED = new Set([
  "!", "{", "}", "if", "then", "else", "elif", "fi", "while", "until", "for", "do", "done",
  "case", "esac", "in", "[[", "function", "select", "time", "coproc",
]); // prettier-ignore

/**
 * One simple command (words and redirections), optionally a pipeline: what a wrapper such as
 * `timeout` or `flock` runs in full, so that removing the wrapper changes nothing else.
 */
export function isSimple(tokens: Token[], allowPipe: boolean): boolean {
  const first = tokens[0];
  if (!first || first.kind !== "word" || (first.value !== null && RESERVED.has(first.value))) {
    return false;
  }
  return tokens.every(
    (t) =>
      t.kind === "word" || t.op === "redirect" || (allowPipe && (t.op === "|" || t.op === "|&")),
  );
}

export const literal = (t: Token | undefined): string | null =>
  t && t.kind === "word" ? t.value : null;

/** `'it'\''s'`: a single-quoted shell word. */
const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Feed cron's stdin text to the command in the command itself: cronvisor has no stdin setting.
 * `printf '%s\n' 'line 1' 'line 2'` writes exactly those lines, each with its newline. A command
 * that is more than one pipeline gets the text as a whole, in a `{ ... }` group on its own lines
 * (so a trailing `# comment` or `&` in the command cannot swallow the closing brace).
 */
export function withStdin(command: string, stdin: string): string {
  const feed = stdin.endsWith("\n")
    ? `printf '%s\\n' ${stdin.slice(0, -1).split("\n").map(shq).join(" ")}`
    : `printf '%s' ${shq(stdin)}`;
  const { tokens, complete } = tokenize(command);
  return complete && isSimple(tokens, true) ? `${feed} | ${command}` : `${feed} | {\n${command}\n}`;
}

// Job names: a readable, valid and unique name for each job, taken from what its command runs.
import { tokenize, type Token } from "./shell.js";

/** Commands that prepare or test rather than do the work: the name comes from a later one. */
const SKIP_HEADS = new Set([
  "cd", "test", "[", "[[", "true", "false", ":", "sleep", "export", "source", ".", "umask", "set",
  "ulimit", "exit", "wait", "echo", "printf", "mkdir", "touch",
]); // prettier-ignore
/** Words that come before the command they run. */
const PREFIX_WORDS = new Set([
  "{", "!", "(", "exec", "nohup", "time", "setsid", "builtin", "if", "then", "else", "elif",
  "while", "until", "do",
]); // prettier-ignore
const INTERPRETER =
  /^(?:sh|bash|dash|zsh|ksh|python[0-9.]*|perl|ruby|node|nodejs|php[0-9.]*|Rscript|deno|bun)$/;
/** Interpreter options whose argument is code, not a script. */
const INLINE_CODE = new Set(["-c", "-e", "-E", "-r", "-p"]);
/** Programs whose first argument says what the job does: `manage.py clearsessions`. */
const DISPATCHERS = new Set([
  "manage", "artisan", "console", "rake", "make", "npm", "yarn", "pnpm", "systemctl", "wp", "drush",
  "docker", "docker-compose", "kubectl", "git",
]); // prettier-ignore

const basename = (w: string) => w.replace(/\/+$/, "").replace(/^.*\//, "");

/**
 * A readable name for a command: the main program or script of its first simple command that
 * does the work (`backup` for `cd /srv && ./backup.sh --full`). null if there is none.
 */
export function nameFor(command: string, depth = 0): string | null {
  const { tokens } = tokenize(command);
  const segments: string[][] = [[]]; // simple commands, without redirections and their targets
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as Token;
    if (t.kind === "op") {
      if (t.op === "redirect") i++;
      else segments.push([]);
    } else {
      const word = t.value ?? command.slice(t.start, t.end).replace(/["']/g, "");
      (segments[segments.length - 1] as string[]).push(word);
    }
  }
  let fallback: string | null = null;
  for (const words of segments) {
    const w = skipPrefixes(words);
    if (w === null || w.length === 0) continue;
    const head = basename(w[0] as string);
    fallback ??= head;
    if (SKIP_HEADS.has(head)) continue;
    const name = nameFromProgram(head, w.slice(1), depth);
    if (name !== null) return name;
  }
  return fallback;
}

/**
 * Drop what comes before the program: assignments, `nice -n 5`, `sudo -u x`, the wrappers.
 * null: the simple command only looks something up (`command -v x`).
 */
function skipPrefixes(words: string[]): string[] | null {
  let w = words;
  for (;;) {
    const first = w[0];
    if (first === undefined) return w;
    const head = basename(first);
    // Drop the program and its options; those in `withArg` take the next word too.
    const options = (withArg: RegExp) => {
      let i = 1;
      while (i < w.length && (w[i] as string).startsWith("-")) {
        i += withArg.test(w[i] as string) ? 2 : 1;
      }
      return w.slice(i);
    };
    if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(first) || PREFIX_WORDS.has(first)) w = w.slice(1);
    else if (head === "command") {
      if (w[1] === "-v" || w[1] === "-V") return null;
      w = options(/^$/);
    } else if (head === "nice") w = options(/^-n$|^--adjustment$/);
    else if (head === "ionice") w = options(/^-[cnp]$/);
    else if (head === "sudo") w = options(/^-[ugCDhprtU]$/);
    else if (head === "env")
      w = options(/^-[uCS]$/); // its NAME=value words go next round
    else if (head === "chronic") w = options(/^$/);
    else if (head === "timeout") w = options(/^-[sk]$|^--signal$|^--kill-after$/).slice(1);
    else if (head === "flock") {
      w = options(/^-[wE]$|^--(wait|timeout|conflict-exit-code)$/).slice(1);
      if (w[0] === "-c" || w[0] === "--command") w = w[1] ? ["sh", "-c", w[1]] : [];
    } else if (head === "su") w = w.includes("-c") ? ["sh", ...w.slice(w.indexOf("-c"))] : [];
    else return w;
  }
}

/** `backup.sh` -> backup; `python3 -m app.tasks` -> app.tasks; null for inline code. */
function nameFromProgram(head: string, args: string[], depth: number): string | null {
  let name = head;
  let rest = args;
  if (INTERPRETER.test(head)) {
    const m = rest.indexOf("-m");
    if (m >= 0 && rest[m + 1]) return rest[m + 1] as string;
    const code = rest.findIndex((a) => INLINE_CODE.has(a));
    if (code >= 0) {
      // `sh -c 'cmd'` is named after cmd; `perl -e '...'` is code with no name of its own.
      const inner = rest[code + 1];
      return /sh$/.test(head) && rest[code] === "-c" && inner && depth < 2
        ? nameFor(inner, depth + 1)
        : null;
    }
    const script = rest.findIndex((a) => !a.startsWith("-"));
    if (script < 0) return head;
    name = basename(rest[script] as string);
    rest = rest.slice(script + 1);
  }
  if (name === "run-parts") {
    const dir = [...rest].reverse().find((a) => !a.startsWith("-"));
    return dir ? basename(dir) : name;
  }
  name = name.replace(/\.(?:sh|bash|py|pl|rb|php|js|mjs|cjs|ts)$/, "");
  if (DISPATCHERS.has(name)) {
    let sub = rest.filter((a) => !a.startsWith("-"));
    if (
      ["npm", "yarn", "pnpm"].includes(name) &&
      ["run", "run-script", "exec"].includes(sub[0] ?? "")
    ) {
      sub = sub.slice(1);
    }
    if (sub[0]) name = `${name}-${sub[0]}`;
  }
  return name;
}

/** A valid, unique job name (`^[a-z0-9][a-z0-9_.-]{0,63}$`); collisions get -2, -3, ... */
export function uniqueName(wanted: string | null, taken: Set<string>): string {
  const base =
    (wanted ?? "")
      .toLowerCase()
      .replace(/[^a-z0-9_.-]+/g, "-")
      .replace(/-{2,}/g, "-")
      .replace(/^[^a-z0-9]+/, "")
      .replace(/[-_.]+$/, "") || "job";
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? "" : `-${n}`;
    const name = base.slice(0, 64 - suffix.length).replace(/[-_.]+$/, "") + suffix;
    if (!taken.has(name)) {
      taken.add(name);
      return name;
    }
  }
}

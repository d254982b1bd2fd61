// Command wrappers that cronvisor does itself (chronic, a non-blocking flock, a flock of a file
// several lines share, timeout): found at the front of a command, removed, and turned into the
// job's keys with a note saying how cronvisor's behaviour differs.
import { isSimple, literal, tokenize, type Token } from "./shell.js";
import type { CronLine } from "./types.js";

/** `flock`, `/usr/bin/flock` -> `flock`; anything else -> null. */
function wrapperName(word: string | null): "chronic" | "flock" | "timeout" | null {
  const m = word === null ? null : /^(?:\/[^\s]*\/)?(chronic|flock|timeout)$/.exec(word);
  return m ? (m[1] as "chronic" | "flock" | "timeout") : null;
}

export type Layer =
  | { kind: "chronic"; text: string }
  | {
      kind: "flock";
      text: string;
      lock: string;
      /** Without -n flock waits for the lock (`yes`), with -w for a while (`timeout`). */
      wait: FlockWait;
      /** The named lock a file several lines flock becomes (docs/locks.md); null: not shared. */
      name: string | null;
    }
  | {
      kind: "timeout";
      text: string;
      ms: number;
      killMs: number | null;
      signal: string | null;
      foreground: boolean;
    };

type FlockWait = "no" | "yes" | "timeout";

/** A lock file several lines flock: those lines, and the named lock it becomes. */
export interface SharedLock {
  lines: number[];
  name: string;
}

export interface Unwrapped {
  command: string;
  layers: Layer[];
  /** Why a wrapper was left in place, for a comment. */
  kept: string[];
}

/** `5m` -> 300000, as coreutils timeout(1) reads it (seconds by default); null if not exact. */
function timeoutMs(text: string): number | null {
  const m = /^([0-9]*)(?:\.([0-9]*))?([smhd]?)$/.exec(text);
  if (!m || (m[1] === "" && !m[2])) return null;
  const unit =
    { "": 1000, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[3] as string] ?? 1000;
  const frac = m[2] ?? "";
  const scaled = BigInt((m[1] || "0") + frac) * BigInt(unit);
  const denominator = 10n ** BigInt(frac.length);
  if (scaled % denominator !== 0n) return null;
  const ms = Number(scaled / denominator);
  return Number.isSafeInteger(ms) ? ms : null;
}

/**
 * Remove the wrappers cronvisor does itself from the front of a command: `chronic`, a
 * non-blocking `flock` (-> overlap: skip) and `timeout` (-> timeout:, kill_grace:), nested in
 * any order. What remains is the rest of the original text, byte for byte (or, for
 * `flock ... -c 'cmd'`, the quoted command's literal text, which flock handed to the same shell).
 * A flock whose lock file is in `sharedLocks` (another line locks it too) becomes that file's
 * named lock, blocking or not. `sharedLocks` null: every flock is taken (sharedLockFiles).
 */
export function unwrap(
  command: string,
  sharedLocks: ReadonlyMap<string, SharedLock> | null,
  line: number,
): Unwrapped {
  let text = command;
  let { tokens, complete } = tokenize(text);
  let k = 0;
  const layers: Layer[] = [];
  const kept: string[] = [];
  const has = (kind: Layer["kind"]) => layers.some((l) => l.kind === kind);
  while (complete) {
    const head = tokens[k];
    const kind = wrapperName(literal(head));
    if (!head || !kind || has(kind)) break;
    const layerText = (endToken: Token) => text.slice(head.start, endToken.end);
    if (kind === "chronic") {
      // chronic only hides output of successful runs; what follows it keeps its meaning.
      let j = k + 1;
      while (/^-[ev]+$/.test(literal(tokens[j]) ?? "")) j++;
      if (tokens[j]?.kind !== "word") break;
      layers.push({ kind, text: layerText(tokens[j - 1] as Token) });
      k = j;
      continue;
    }
    if (kind === "flock") {
      const f = parseFlock(tokens, k + 1);
      if (typeof f === "string") {
        kept.push(`kept \`${text.slice(head.start, tokens[k + 1]?.end ?? head.end)} ...\`: ${f}`);
        break;
      }
      const shared = sharedLocks?.get(f.lock);
      const others = (shared?.lines ?? []).filter((l) => l !== line);
      const name = others.length > 0 ? (shared?.name ?? null) : null;
      if (f.wait !== "no" && name === null && sharedLocks !== null) {
        kept.push(`kept \`${layerText(tokens[f.lockIndex] as Token)}\`: ${WAITS[f.wait]}`);
        break;
      }
      const lock = { lock: f.lock, wait: f.wait, name };
      if (f.inner !== null) {
        layers.push({ kind, text: `${layerText(tokens[f.lockIndex + 1] as Token)}`, ...lock });
        text = f.inner;
        ({ tokens, complete } = tokenize(text));
        k = 0;
        continue;
      }
      if (!isSimple(tokens.slice(f.next), false)) {
        kept.push(
          `kept \`${layerText(tokens[f.lockIndex] as Token)}\`: it locks only the first command of the line`,
        );
        break;
      }
      layers.push({ kind, text: layerText(tokens[f.lockIndex] as Token), ...lock });
      k = f.next;
      continue;
    }
    const t = parseTimeout(tokens, k + 1);
    if (typeof t === "string") {
      kept.push(`kept \`${text.slice(head.start, tokens[k + 1]?.end ?? head.end)} ...\`: ${t}`);
      break;
    }
    if (!isSimple(tokens.slice(t.next), false)) {
      kept.push(
        `kept \`${layerText(tokens[t.next - 1] as Token)}\`: it limits only the first command of the line`,
      );
      break;
    }
    layers.push({ kind, text: layerText(tokens[t.next - 1] as Token), ...t.layer });
    k = t.next;
  }
  const rest =
    layers.length === 0 ? command : tokens[k] ? text.slice((tokens[k] as Token).start) : text;
  return { command: rest, layers, kept };
}

/** Why a flock of a file no other line locks stays: cronvisor's overlap skip does not wait. */
const WAITS = {
  yes: "without -n it waits for the lock and then runs; cronvisor's nearest is overlap: queue",
  timeout: "it waits for the lock (-w)",
} as const;

/** flock(1)'s options up to the lock file (it stops at the first non-option, like getopt "+"). */
function parseFlock(
  tokens: Token[],
  j: number,
):
  | string
  | { lock: string; lockIndex: number; next: number; inner: string | null; wait: FlockWait } {
  let nonblock = false;
  let timed = false;
  for (;;) {
    const v = literal(tokens[j]);
    if (v === null || !v.startsWith("-") || v === "-") break;
    j++;
    if (v === "--") break;
    if (v.startsWith("--")) {
      const [name] = v.split("=", 1);
      if (name === "--nonblock" || name === "--nb") nonblock = true;
      else if (name === "--conflict-exit-code") {
        if (!v.includes("=")) j++;
      } else if (name === "--wait" || name === "--timeout") {
        timed = true;
        if (!v.includes("=")) j++;
      } else if (name === "--shared") return "a shared lock (-s) lets other readers in";
      else if (!["--exclusive", "--close", "--no-fork", "--verbose"].includes(name as string)) {
        return `unknown option ${v}`;
      }
      continue;
    }
    for (let c = 1; c < v.length; c++) {
      const o = v[c] as string;
      if (o === "n") nonblock = true;
      else if (o === "E") {
        if (c === v.length - 1) j++;
        break;
      } else if (o === "w") {
        timed = true;
        if (c === v.length - 1) j++;
        break;
      } else if (o === "s") return "a shared lock (-s) lets other readers in";
      else if (!"xeoF".includes(o)) return `unknown option -${o}`;
    }
  }
  const lock = literal(tokens[j]);
  if (lock === null) return "its lock file is computed when it runs";
  const wait: FlockWait = nonblock ? "no" : timed ? "timeout" : "yes";
  const lockIndex = j;
  const after = literal(tokens[j + 1]);
  if (after === "-c" || after === "--command") {
    const inner = literal(tokens[j + 2]);
    if (inner === null || tokens.length !== j + 3)
      return "its -c command is not a plain quoted string";
    return { lock, lockIndex, next: j + 3, inner, wait };
  }
  if (tokens[j + 1]?.kind !== "word") return "it runs no command";
  return { lock, lockIndex, next: j + 1, inner: null, wait };
}

/** timeout(1)'s options and duration; `next` is the command's first token. */
function parseTimeout(
  tokens: Token[],
  j: number,
):
  | string
  | {
      next: number;
      layer: { ms: number; killMs: number | null; signal: string | null; foreground: boolean };
    } {
  let signal: string | null = null;
  let kill: string | null = null;
  let foreground = false;
  const argOf = (v: string, at: number): string | null =>
    v.length > at ? v.slice(at) : (literal(tokens[j++]) ?? null);
  for (;;) {
    const v = literal(tokens[j]);
    if (v === null || !v.startsWith("-") || v === "-") break;
    j++;
    if (v === "--") break;
    if (v.startsWith("--")) {
      const eq = v.indexOf("=");
      const name = eq < 0 ? v : v.slice(0, eq);
      const arg = () => (eq < 0 ? literal(tokens[j++]) : v.slice(eq + 1));
      if (name === "--signal") signal = arg();
      else if (name === "--kill-after") kill = arg();
      else if (name === "--foreground") foreground = true;
      else if (name !== "--preserve-status" && name !== "--verbose") return `unknown option ${v}`;
      continue;
    }
    for (let c = 1; c < v.length; c++) {
      const o = v[c];
      if (o === "s" || o === "k") {
        const a = argOf(v, c + 1);
        if (o === "s") signal = a;
        else kill = a;
        break;
      }
      if (o !== "v") return `unknown option -${o}`;
    }
  }
  const duration = literal(tokens[j]);
  const ms = duration === null ? null : timeoutMs(duration);
  if (ms === null) return `cannot read its duration "${duration ?? "?"}"`;
  const killMs = kill === null ? null : timeoutMs(kill);
  if (kill !== null && killMs === null) return `cannot read its kill-after "${kill}"`;
  if (tokens[j + 1]?.kind !== "word") return "it runs no command";
  return { next: j + 1, layer: { ms, killMs: killMs || null, signal, foreground } };
}

/**
 * The lock files that more than one line flocks, with those lines and the named lock each
 * becomes: such a lock excludes the lines from each other, as `locks: [NAME]` does.
 */
export function sharedLockFiles(cronLines: CronLine[]): Map<string, SharedLock> {
  const lockLines = new Map<string, number[]>();
  for (const c of cronLines) {
    for (const layer of unwrap(c.command, null, c.entry.line).layers) {
      if (layer.kind === "flock") {
        lockLines.set(layer.lock, [...(lockLines.get(layer.lock) ?? []), c.entry.line]);
      }
    }
  }
  const taken = new Set<string>();
  const out = new Map<string, SharedLock>();
  for (const [file, lines] of lockLines) {
    if (lines.length < 2) continue;
    const base = lockName(file);
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base.slice(0, 60)}-${n}`;
    taken.add(name);
    out.set(file, { lines, name });
  }
  return out;
}

/** `/var/lock/db.lock` -> `db`: the file's name without its extension, as a lock name. */
export function lockName(file: string): string {
  const base = (file.split("/").pop() ?? "").replace(/\.(lock|lck|flock|pid)$/i, "");
  const name = base
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .slice(0, 64);
  return name === "" ? "lock" : name;
}

/** The job keys that replace the removed wrappers. */
export interface WrapperKeys {
  overlap: "skip" | "queue" | null;
  /** Named locks (a flock file several lines share). */
  locks: string[];
  timeoutMs: number | null;
  killGraceMs: number | null;
}

/** The removed wrappers as job keys, each with a note on what changes. */
export function wrapperKeys(layers: Layer[], notes: string[]): WrapperKeys {
  const keys: WrapperKeys = { overlap: null, locks: [], timeoutMs: null, killGraceMs: null };
  for (const layer of layers) {
    if (layer.kind === "chronic") {
      notes.push(
        `removed \`${layer.text}\`: cronvisor keeps every run's output in its log and alerts on failure (alerts:)`,
      );
    } else if (layer.kind === "flock" && layer.name !== null) {
      keys.locks.push(layer.name);
      keys.overlap = layer.wait === "no" ? "skip" : "queue";
      notes.push(`removed \`${layer.text}\`: ${sharedNote(layer.lock, layer.name, layer.wait)}`);
    } else if (layer.kind === "flock") {
      keys.overlap = "skip";
      notes.push(
        `removed \`${layer.text}\`: overlap: skip does the same for this job (a slot that finds the previous run still going is skipped and recorded). If anything outside this crontab also locks ${layer.lock}, put the flock back`,
      );
    } else if (layer.ms === 0) {
      notes.push(`removed \`${layer.text}\`: a timeout of 0 never fires`);
    } else {
      keys.timeoutMs = layer.ms;
      keys.killGraceMs = layer.killMs;
      notes.push(`removed \`${layer.text}\`: ${timeoutNote(layer)}`);
    }
  }
  return keys;
}

/** What a shared flock file becomes: the named lock, and how waiting for it differs. */
function sharedNote(file: string, name: string, wait: FlockWait): string {
  const how =
    wait === "no"
      ? "a slot that finds it held is skipped and recorded with its holder (overlap: skip), as flock -n exited"
      : `a slot that finds it held waits for it (overlap: queue: one slot per job at most${wait === "timeout" ? ", with no time limit: -w's is not kept" : ""}), as flock waited`;
  return `other lines lock ${file} too: \`locks: [${name}]\` holds the named lock ${name} for each run's whole life across those jobs, which status shows with its holder; ${how} (docs/locks.md). If anything outside this crontab also locks ${file}, put the flock back`;
}

/** How cronvisor's timeout differs from what timeout(1) did. */
function timeoutNote(layer: Extract<Layer, { kind: "timeout" }>): string {
  const named = (layer.signal ?? "TERM").toUpperCase().replace(/^SIG/, "");
  const signal = { "1": "HUP", "2": "INT", "9": "KILL", "15": "TERM" }[named] ?? named;
  const how =
    signal === "KILL"
      ? "timeout(1) sent SIGKILL at once; cronvisor sends SIGTERM first and SIGKILL after kill_grace"
      : signal !== "TERM"
        ? `timeout(1) sent SIG${signal}; cronvisor sends SIGTERM, then SIGKILL after kill_grace`
        : layer.killMs
          ? "like timeout(1), cronvisor sends SIGTERM, then SIGKILL after kill_grace"
          : "timeout(1) sent only SIGTERM; cronvisor also sends SIGKILL after kill_grace";
  const group = layer.foreground
    ? " (to the whole process group; --foreground signalled only the command)"
    : " (to the whole process group)";
  return `${how}${group}`;
}

// The marker broker's wire format, shared by its server (broker-server.ts) and its client
// (broker-client.ts): one JSON object per line each way, one reply line per request line. Parsing
// and validating a request is pure and total: whatever a client sends becomes a Request or an
// error reply, never a throw.
import { EXIT } from "../core/exit.js";
import { checkKey } from "./target.js";

/**
 * A request line longer than this is refused and its connection closed (memory is bounded: a
 * connection holds at most one line). Close to the largest valid request: a `progress` message
 * of 4096 characters, each escaped to 6 bytes at worst, is under 25 KiB; a `mark` is split by the
 * client into lines under MARK_LINE_TARGET.
 */
export const LINE_MAX = 64 * 1024;
/**
 * The client keeps each `mark` request's keys under this, splitting a long list: one key (1024
 * characters, 6 KiB escaped at worst) and the request's other fields fit in what is left.
 */
export const MARK_LINE_TARGET = LINE_MAX - 8 * 1024;
const MESSAGE_MAX = 4096;
const JOB_MAX = 64;

export type Op = "mark" | "check" | "claim" | "command" | "complete" | "release" | "progress";

/** What every request carries: the run's secret (from CRONVISOR_SECRET) and the job it names. */
interface Base {
  secret: string;
  job: string;
}

export type Request = Base &
  (
    | { op: "mark"; keys: string[] }
    | { op: "check"; key: string }
    /** `once`: pid is the `once` process, which must belong to the run's process group. */
    | { op: "claim" | "complete" | "release"; key: string; pid: number }
    /** The command a claim runs (cmd_pid, also in the run's group). */
    | { op: "command"; key: string; pid: number; cmd_pid: number }
    | { op: "progress"; message: string | null }
  );

export type Reply =
  | { ok: true; n?: number; done?: boolean; claim?: unknown }
  | { ok: false; code: number; error: string };

export function refusal(code: number, error: string): Reply {
  return { ok: false, code, error };
}

const OPS = new Set<string>([
  "mark",
  "check",
  "claim",
  "command",
  "complete",
  "release",
  "progress",
]);

/** A request, or the reply that refuses it (exit 2: a client of the broker got the format wrong). */
export function parseRequest(line: string): Request | { refused: Reply } {
  const bad = (why: string) => ({ refused: refusal(EXIT.usage, `bad broker request: ${why}`) });
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return bad("not JSON");
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) return bad("not an object");
  const r = v as Record<string, unknown>;
  if (typeof r.op !== "string" || !OPS.has(r.op)) return bad("unknown op");
  if (typeof r.secret !== "string" || !/^[0-9a-f]{64}$/.test(r.secret))
    return bad("secret must be 64 hex digits");
  if (typeof r.job !== "string" || r.job.length === 0 || r.job.length > JOB_MAX)
    return bad("job must be a job name");
  const base = { secret: r.secret, job: r.job };
  const why = fieldError(r);
  if (why !== null) return bad(why);
  switch (r.op) {
    case "mark":
      return { ...base, op: "mark", keys: r.keys as string[] };
    case "check":
      return { ...base, op: "check", key: r.key as string };
    case "command":
      return {
        ...base,
        op: "command",
        key: r.key as string,
        pid: r.pid as number,
        cmd_pid: r.cmd_pid as number,
      };
    case "progress":
      return { ...base, op: "progress", message: (r.message ?? null) as string | null };
    default:
      return { ...base, op: r.op as "claim", key: r.key as string, pid: r.pid as number };
  }
}

/** The op-specific fields' problem, or null when they are all right. */
function fieldError(r: Record<string, unknown>): string | null {
  if (r.op === "mark") {
    if (!Array.isArray(r.keys) || r.keys.length === 0) return "keys must be a non-empty list";
    for (const k of r.keys) {
      const why = keyError(k);
      if (why !== null) return why;
    }
    return null;
  }
  if (r.op === "progress") {
    const m = r.message ?? null;
    if (m !== null && (typeof m !== "string" || m.length > MESSAGE_MAX))
      return `message must be a string of at most ${MESSAGE_MAX} characters`;
    return null;
  }
  const why = keyError(r.key);
  if (why !== null || r.op === "check") return why;
  if (!isPid(r.pid)) return "pid must be a process id";
  if (r.op === "command" && !isPid(r.cmd_pid)) return "cmd_pid must be a process id";
  return null;
}

function keyError(k: unknown): string | null {
  if (typeof k !== "string") return "a key must be a string";
  try {
    checkKey(k);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

function isPid(p: unknown): p is number {
  return typeof p === "number" && Number.isInteger(p) && p > 1 && p < 1 << 30;
}

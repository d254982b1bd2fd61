// What every marker path shares, whatever it writes through (the store itself, or the marker
// broker): the errors a marker call throws, the key rule, and the run a call writes for, read
// from the environment a job receives. Imported by the library, the CLI and the broker alike, so
// it imports nothing heavier than the exit table and the store's errors: every `mark` loads it.
import { EXIT } from "../core/exit.js";
import { StoreError } from "../store/store.js";
import type { ClaimOutcome, MarkerWriter, Owner } from "../store/rows.js";

/** The writer's fence is stale: a newer run holds the job, or this run has ended. Exit 3. */
export class FenceError extends Error {
  readonly exitCode = EXIT.unknown;
}
/** Another live `once` holds this key right now. Exit 75. */
export class ClaimHeldError extends Error {
  readonly exitCode = EXIT.busy;
}
/** Bad arguments. Exit 2. */
export class UsageError extends Error {
  readonly exitCode = EXIT.usage;
}
/** The broker refused a request or could not be reached; exitCode is what the command exits. */
export class BrokerCallError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** The store stayed busy past its timeout (SQLite's own error, or the store's name for it). */
export function isBusy(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? "";
  return code.startsWith("SQLITE_BUSY") || (e instanceof StoreError && e.code === "busy");
}

export interface MarkersTarget extends MarkerWriter {
  stateDir: string;
}

const KEY_MAX = 1024;

export function checkKey(key: string): string {
  if (key.length === 0) throw new UsageError("a marker key must not be empty");
  if (key.length > KEY_MAX)
    throw new UsageError(`a marker key must be at most ${KEY_MAX} characters`);
  if (/[\n\r\0]/.test(key))
    throw new UsageError(`marker key ${JSON.stringify(key)} contains a newline or NUL`);
  return key;
}

/** Read the current run from the environment a job receives. */
export function targetFromEnv(env: NodeJS.ProcessEnv = process.env): MarkersTarget {
  const stateDir = env.CRONVISOR_STATE_DIR;
  const job = env.CRONVISOR_JOB;
  const id = Number(env.CRONVISOR_RUN_ID);
  const fence = Number(env.CRONVISOR_FENCE);
  if (!stateDir || !job || !Number.isInteger(id) || !Number.isInteger(fence)) {
    throw new UsageError(
      "not inside a cronvisor run (CRONVISOR_STATE_DIR, CRONVISOR_JOB, CRONVISOR_RUN_ID, CRONVISOR_FENCE unset); outside a job pass --job NAME and the config",
    );
  }
  return { stateDir, job, run: { id, fence } };
}

export function staleFence(t: MarkerWriter): FenceError {
  const run = t.run as { id: number; fence: number };
  return new FenceError(
    `refused: run ${run.id} (fence ${run.fence}) is no longer the current run of job ${t.job}; nothing was written`,
  );
}

/** A claim's outcome as the marker path reports it: "done", "claimed", or the error to throw. */
export function claimResult(t: MarkerWriter, key: string, out: ClaimOutcome): "done" | "claimed" {
  switch (out.kind) {
    case "done":
    case "claimed":
      return out.kind;
    case "stale":
      throw staleFence(t);
    case "held": {
      const h = out.holder;
      const run = `run ${h.run_id ?? "-"}`;
      throw new ClaimHeldError(
        out.by === "once"
          ? `key ${JSON.stringify(key)} is being worked on by pid ${h.pid} (${run})`
          : `key ${JSON.stringify(key)} is being worked on by pid ${h.cmd_pid}, whose \`once\` (pid ${h.pid}, ${run}) has died`,
      );
    }
  }
}

/**
 * Where a Markers object's calls go, synchronously: the store itself (`LocalPath`), or the
 * marker broker of the run (`BrokerPath`, broker-sync.ts). Each call is one durable step; a
 * stale writer gets null or false back and nothing is written.
 */
export interface SyncMarkerPath {
  isDone(w: MarkerWriter, key: string): boolean;
  markDone(w: MarkerWriter, keys: readonly string[], now: number): number | null;
  takeClaim(w: MarkerWriter, key: string, me: Owner, now: number): ClaimOutcome;
  completeClaim(w: MarkerWriter, key: string, pid: number, now: number): boolean;
  /** Best effort: the claim is held by its `once` process anyway while that lives. */
  noteClaimCommand(job: string, key: string, pid: number, cmdPid: number): void;
  releaseClaim(job: string, key: string, pid: number): void;
  progress(w: MarkerWriter, message: string | null, now: number): boolean;
  list(job: string): { key: string; run_id: number | null; created_at: number }[];
  close(): void;
}

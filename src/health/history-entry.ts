// One run as `history --json` and status's last_run show it: the row's columns, times as ISO.
import type { HistoryRow } from "../store/store.js";
import { iso } from "./iso.js";

export interface HistoryEntry {
  run_id: number;
  job: string;
  slot: string | null;
  trigger: string | null;
  status: string;
  reason: string | null;
  exit_code: number | null;
  signal: string | null;
  attempt: number;
  started_at: string;
  finished_at: string | null;
  duration_ms: number | null;
  markers_new: number;
  markers_skipped: number;
  pid: number | null;
  log_path: string | null;
  /** The node that ran it. */
  node: string | null;
  /** User + system CPU seconds of all its processes (null: not measured, or still running). */
  cpu_s: number | null;
  /** Its peak memory in bytes (null: not measured, or still running). */
  memory_peak_bytes: number | null;
}

export function historyEntry(r: HistoryRow): HistoryEntry {
  return {
    run_id: r.id,
    job: r.job,
    slot: iso(r.slot),
    trigger: r.trigger,
    status: r.status,
    reason: r.reason,
    exit_code: r.exit_code,
    signal: r.signal,
    attempt: r.attempt,
    started_at: iso(r.started_at) as string,
    finished_at: iso(r.finished_at),
    duration_ms: r.duration_ms,
    markers_new: r.markers_new,
    markers_skipped: r.markers_skipped,
    pid: r.pid,
    log_path: r.log_path,
    node: r.node ?? null, // a summary written before migration 011 has none
    cpu_s: r.cpu_s ?? null,
    memory_peak_bytes: r.memory_peak_bytes ?? null,
  };
}

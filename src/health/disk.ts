// The disk the state dir takes (daemon.disk in `status --json`) and when it runs short (pure).
import type { DiskFacts } from "../core/disk.js";

export interface DiskReport {
  store_bytes: number | null;
  logs_bytes: number | null;
  free_bytes: number | null;
  /** null, or the WARNING sentence: the state dir's file system has little left. */
  low_space: string | null;
}

/** Below either, status says WARNING: a full disk stops the store's writes and the runs' logs. */
export const LOW_FREE_BYTES = 500 * 1024 * 1024;
export const LOW_FREE_RATIO = 0.05;

export function diskReport(facts: DiskFacts, logsBytes: number | null): DiskReport {
  const { free_bytes: free, fs_bytes: size } = facts;
  const low =
    free !== null && (free < LOW_FREE_BYTES || (size !== null && free < size * LOW_FREE_RATIO));
  return {
    store_bytes: facts.store_bytes,
    logs_bytes: logsBytes,
    free_bytes: free,
    low_space: low
      ? `the state dir's file system has ${sizeText(free)} free (${percent(free, size)}; under 500 MB or 5%)`
      : null,
  };
}

/** Bytes as people read them (1024-based, as the config's sizes): 812 KB, 12.4 MB, 8.1 GB. */
export function sizeText(bytes: number): string {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 || v >= 100 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

/** status's disk line (what the store and the logs take, what is left), then any warning. */
export function diskLines(d: DiskReport): string[] {
  const size = (b: number | null): string => (b === null ? "-" : sizeText(b));
  const store = d.store_bytes === null ? "" : `store ${size(d.store_bytes)}, `;
  const line = `  disk: ${store}logs ${size(d.logs_bytes)}, ${size(d.free_bytes)} free`;
  return d.low_space ? [line, `  WARNING: ${d.low_space}`] : [line];
}

function percent(free: number, size: number | null): string {
  return size ? `${((100 * free) / size).toFixed(1)}%` : "of an unknown size";
}

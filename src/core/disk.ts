// What the state dir takes and has left on its disk, for `status` and the page (daemon.disk): two
// stats and a statfs, a few microseconds; never a walk of a directory (the logs' total is the
// daemon's own count, read from its row).
import fs from "node:fs";
import path from "node:path";

/** The store file's bytes (with its WAL; null for a PostgreSQL store) and the file system's. */
export interface DiskFacts {
  store_bytes: number | null;
  free_bytes: number | null;
  fs_bytes: number | null;
}

export function diskFacts(stateDir: string, sqlite: boolean): DiskFacts {
  let storeBytes: number | null = null;
  if (sqlite) {
    const file = path.join(stateDir, "cronvisor.db");
    const main = fs.statSync(file, { throwIfNoEntry: false });
    const wal = fs.statSync(`${file}-wal`, { throwIfNoEntry: false });
    storeBytes = main ? main.size + (wal?.size ?? 0) : null;
  }
  try {
    const s = fs.statfsSync(stateDir);
    // bavail: what an unprivileged writer may still use (the daemon may not be root).
    return {
      store_bytes: storeBytes,
      free_bytes: s.bavail * s.bsize,
      fs_bytes: s.blocks * s.bsize,
    };
  } catch {
    return { store_bytes: storeBytes, free_bytes: null, fs_bytes: null };
  }
}

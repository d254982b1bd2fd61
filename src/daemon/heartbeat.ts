// The heartbeat file: a liveness signal an external `stat`-based check can watch, independent of
// the store (the store's daemon row is the primary beat; status reads that).
import fs from "node:fs";
import path from "node:path";
import { WRITE_NOFOLLOW } from "../core/safe-path.js";

export function writeHeartbeatFile(stateDir: string, now: number): void {
  try {
    // Never through a link planted in its place.
    const fd = fs.openSync(path.join(stateDir, "heartbeat"), WRITE_NOFOLLOW, 0o600);
    try {
      fs.writeSync(fd, `${process.pid} ${new Date(now).toISOString()}\n`);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // a full disk: the store row is the primary beat; status reads that
  }
}

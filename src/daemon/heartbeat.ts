// The heartbeat file: a liveness signal an external `stat`-based check can watch, independent of
// the store (the store's daemon row is the primary beat; status reads that).
import fs from "node:fs";
import path from "node:path";

export function writeHeartbeatFile(stateDir: string, now: number): void {
  try {
    fs.writeFileSync(
      path.join(stateDir, "heartbeat"),
      `${process.pid} ${new Date(now).toISOString()}\n`,
      {
        mode: 0o600,
      },
    );
  } catch {
    // a full disk: the store row is the primary beat; status reads that
  }
}

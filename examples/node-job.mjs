// A Node job using the cronvisor library: markers without a process per call.
// Run by the daemon (it sets CRONVISOR_*); from a clone the package is imported by path.
import { Markers } from "../dist/index.js";

const m = Markers.fromEnv();
try {
  for (let i = 0; i < 20; i++) {
    // once(): skip if done, else do the work and mark it right after.
    await m.once(`item-${i}`, async () => {
      process.stdout.write(`processing item ${i}\n`);
    });
  }
  m.progress("20 items checked");
} finally {
  m.close();
}

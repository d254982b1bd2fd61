// What the many-hosts tests (nodes.test.js, nodes-faults.test.js) share: a node's config on a
// PostgreSQL store, and the checks every one of them makes.
import assert from "node:assert/strict";
import path from "node:path";
import { ROOT, readPgStore, waitFor, writeConfig } from "./helpers.js";

const NODE_DIR = path.dirname(process.execPath);

/** A config for node `name` on the store `url`, its state in dir/state-NAME. */
export function nodeConfig(dir, name, url, jobs, lease = "3s", top = "") {
  return writeConfig(
    dir,
    `store: "${url}"
node: ${name}
state_dir: ./state-${name}
heartbeat: 1s
lease: ${lease}
${top}
env: { PATH: "${path.join(ROOT, "bin")}:${NODE_DIR}:/usr/bin:/bin" }
jobs:
${jobs}`,
    `${name}.yaml`,
  );
}

/** No (job, slot) has more than one first attempt: no slot ran or was recorded twice. */
export async function assertEachSlotOnce(raw) {
  assert.deepEqual(await readPgStore(raw).doubled({ attempt: 1 }), []);
}

/** The daemons have started (their start-up is done, their jobs watched). */
export const started = (ds) =>
  waitFor(() => ds.every((d) => /daemon \d+ started/.test(d.err)), "the daemons started", 30_000);

/** Is a process alive? */
export const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
};

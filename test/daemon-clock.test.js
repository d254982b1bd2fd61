// The Supervisor in this process on a fake clock (the real store, real `true` runs): moving the
// wall clock backwards is noticed, and no slot fires twice.
import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { parseConfig } from "../dist/config/config.js";
import { Supervisor } from "../dist/daemon/supervisor.js";
import { tmpdir, waitFor } from "./helpers.js";

test("a wall clock stepped back: noticed, replanned from now, and no slot runs twice", async (t) => {
  const dir = tmpdir(t);
  const yaml = `state_dir: ${path.join(dir, "state")}\nheartbeat: 1s\njobs:\n  tick:\n    schedule: "* * * * * *"\n    command: "true"\n    catchup: skip\n`;
  const { config, errors } = parseConfig(yaml, path.join(dir, "jobs.yaml"));
  assert.deepEqual(errors, []);
  let offset = 0;
  const now = () => Date.now() + offset;
  const lines = [];
  const slots = [];
  const sup = new Supervisor({
    config,
    now,
    log: (l) => lines.push(l),
    hooks: { runStarted: (run) => slots.push(run.slot) },
  });
  await sup.start();
  t.after(() => sup.stop());
  await waitFor(() => slots.length >= 2, "two slots ran");
  const high = now();
  offset -= 7_000; // the clock steps back 7 s: past slots come due again
  await waitFor(() => now() > high + 1_500, "the clock caught up");
  await sup.stop();
  assert.ok(
    lines.some((l) => l.includes("wall clock stepped back")),
    lines.join("\n"),
  );
  assert.ok(
    lines.some((l) => l.includes("already has a disposition; not run again")),
    lines.join("\n"),
  );
  assert.equal(new Set(slots).size, slots.length, `a slot ran twice: ${slots.join(", ")}`);
  assert.ok(
    slots.some((s) => s > high),
    "slots after the step's high-water mark ran",
  );
});

// The seeds' kill test (test/incidents.test.js, incident 1) with the job running as another user:
// a `user:` job under a root daemon, its `once` calls going through the marker broker because its
// processes cannot open the 0700 store. The same job, the same kills, the same assertions.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ROOT, runAs, testUser, tmpdir, userCli, readStore } from "./helpers.js";
import { killTest, lines } from "./kill-harness.js";
import { needsNow } from "./needs.js";

/**
 * A work dir the user can traverse (the state dir the daemon makes in it stays root's, 0700),
 * with an out/ dir the user owns for the warehouse, and the user's copy of the CLI.
 */
function userSetup(t) {
  const user = testUser();
  // No second user (not root): the caller's needsNow skips with the reason, or fails under CI.
  if (user.skip) return user;
  const copy = userCli(user);
  if (copy.skip) return copy;
  const dir = tmpdir(t);
  fs.chmodSync(dir, 0o711);
  const out = path.join(dir, "out");
  fs.mkdirSync(out, { mode: 0o755 });
  fs.chownSync(out, user.uid, user.gid);
  return {
    user,
    copy,
    dir,
    warehouse: path.join(out, "warehouse.txt"),
    path: `${copy.bin}:${path.dirname(process.execPath)}:/usr/bin:/bin`,
    jobKeys: `    user: ${user.name}\n    cwd: /\n`,
  };
}

/**
 * After the kill test: the job ran as the user, who could not read or write the store, and
 * every item's marker is in it, written by one of the job's runs (through the broker).
 */
function assertThroughBroker({ user, dir, warehouse }, items) {
  assert.equal(fs.statSync(warehouse).uid, user.uid, "the warehouse is the job user's file");
  assert.ok(lines(warehouse).length >= items);
  const state = path.join(dir, ".cronvisor");
  const store = path.join(state, "cronvisor.db");
  assert.equal(fs.statSync(state).mode & 0o777, 0o700);
  assert.equal(fs.statSync(store).uid, 0);
  for (const probe of [
    ["test", "-r", store],
    ["test", "-w", store],
    ["ls", state],
    ["cat", store],
  ]) {
    const r = runAs(user, probe);
    assert.notEqual(r.code, 0, `${user.name} could ${probe.join(" ")}`);
  }
  const keys = readStore(state).markerKeys("enrich");
  assert.deepEqual(
    keys,
    Array.from({ length: items }, (_, i) => `task-${i}`).sort(),
    "every item's marker is in the store",
  );
  const runIds = new Set(
    readStore(state)
      .runs()
      .map((r) => r.id),
  );
  const byRuns = readStore(state)
    .markers({ job: "enrich" })
    .filter((m) => runIds.has(m.run_id)).length;
  assert.equal(byRuns, items, "each marker names the run that wrote it");
}

// The Node library job (examples/enrich.mjs), as in incidents.test.js: 200 items, 5 kills.
test("kill test as a user: job, the Node library through the broker: 200 items, 5 SIGKILLs of daemon and job, every item done, repeats <= kills", async (t) => {
  const s = userSetup(t);
  // Skipped only with userSetup's reason: not root, no second user, or one who cannot run node; in CI never.
  if (needsNow(t, s.skip)) return;
  // enrich.mjs imports ../dist/index.js: beside the user's copy of the CLI.
  const examples = path.join(s.copy.bin, "..", "examples");
  fs.mkdirSync(examples, { recursive: true, mode: 0o755 });
  fs.copyFileSync(path.join(ROOT, "examples", "enrich.mjs"), path.join(examples, "enrich.mjs"));
  fs.chmodSync(path.join(examples, "enrich.mjs"), 0o644);
  const items = 200;
  await killTest(t, {
    ...s,
    kills: 5,
    items,
    command: `[node, ${path.join(examples, "enrich.mjs")}]`,
  });
  assertThroughBroker(s, items);
});

// The shell job (examples/enrich.sh): every item a `cronvisor once` process, as in incidents.test.js.
test("kill test as a user: job, shell job with `cronvisor once` per item through the broker: 3 SIGKILLs, every item done, repeats <= kills", async (t) => {
  const s = userSetup(t);
  // Skipped only with userSetup's reason: not root, no second user, or one who cannot run node; in CI never.
  if (needsNow(t, s.skip)) return;
  // The clone may sit where the user cannot read: the job is a copy in the work dir.
  const job = path.join(s.dir, "enrich.sh");
  fs.copyFileSync(path.join(ROOT, "examples", "enrich.sh"), job);
  fs.chmodSync(job, 0o755);
  const items = 40;
  await killTest(t, { ...s, kills: 3, items, command: job });
  assertThroughBroker(s, items);
});

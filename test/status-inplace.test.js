// `status` on a store at rest (no -wal: the daemon is stopped) reads the file where it lies,
// opened as SQLite's `immutable` URI, instead of copying it into memory: no lock, no -wal, no
// -shm, nothing written into the state dir. A writer that writes the file meanwhile (its
// checkpoint) is seen afterwards (`changedSinceOpen`), and status reads again; a file written
// within the last second is copied as before (store-refuse.test.js covers that path).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ROOT, cleanEnv, cli, tmpdir, waitFor, writeConfig } from "./helpers.js";

const CONFIG = `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n`;

/**
 * A store written by a mark and a run (writers that close: the store is left at rest), in a
 * directory whose name needs escaping in a URI, once its file has been quiet for over a second.
 */
async function restingStore(t) {
  const dir = tmpdir(t, "cvx-in place #1 %41?-");
  const cfg = writeConfig(dir, CONFIG);
  const state = path.join(dir, ".cronvisor");
  assert.equal(cli(["mark", "--job", "a", "done-1", "-c", cfg]).code, 0);
  assert.equal(cli(["run", "a", "-c", cfg]).code, 0);
  // The first status writes the config cache (by design: the cache, never the store).
  assert.equal(cli(["status", "-c", cfg]).code, 0);
  const file = path.join(state, "cronvisor.db");
  assert.deepEqual(
    fs.readdirSync(state).filter((n) => n.startsWith("cronvisor.db")),
    ["cronvisor.db"],
  );
  await waitFor(() => Date.now() - fs.statSync(file).mtimeMs > 1200, "a quiet store file", 10_000);
  return { cfg, state, file };
}

/** Every file under the state dir: its bytes' hash, mode and times. */
function snapshot(dir) {
  const out = {};
  for (const e of fs.readdirSync(dir, { recursive: true })) {
    const p = path.join(dir, e);
    const st = fs.statSync(p, { bigint: true });
    out[e] = {
      mode: st.mode,
      mtime: st.mtimeNs,
      hash: st.isFile() ? crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex") : "",
    };
  }
  return out;
}

/** Run `body` (an ES module's text, given `state` and `file`) in a fresh Node: its JSON out. */
function inChild(body, state, file) {
  const src = `const state = ${JSON.stringify(state)}; const file = ${JSON.stringify(file)};
const { SqliteStatusStore } = await import(${JSON.stringify(path.join(ROOT, "dist", "store", "sqlite-status-store.js"))});
const open = (inPlace) => SqliteStatusStore.openStatus(state, { create: false, readonly: true, inPlace });
const out = {};
${body}
process.stdout.write(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", src], {
    cwd: ROOT,
    encoding: "utf8",
    env: cleanEnv(),
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test("status reads a store at rest in place: no copy, nothing written, the store's content", async (t) => {
  const { cfg, state, file } = await restingStore(t);
  const before = snapshot(state);
  const seen = inChild(
    `const s = open(true);
out.name = s.db.name; out.memory = s.db.memory;
out.markers = s.db.prepare("SELECT marker_count FROM jobs WHERE name = 'a'").pluck().get();
out.changed = s.changedSinceOpen();
await s.close();`,
    state,
    file,
  );
  assert.equal(seen.memory, false, "read where it lies, not deserialised into memory");
  assert.match(seen.name, /^file:\/\/.*\?mode=ro&immutable=1$/);
  assert.equal(decodeURIComponent(new URL(seen.name).pathname), file);
  assert.equal(seen.markers, 1);
  assert.equal(seen.changed, false);
  assert.deepEqual(snapshot(state), before, "the in-place open changed the state dir");

  for (const args of [["status", "--json"], ["status"], ["status", "a"]]) {
    const r = cli([...args, "-c", cfg]);
    assert.equal(r.code, 0, r.stderr);
    if (args[1] === "--json") {
      const job = JSON.parse(r.stdout).jobs[0];
      assert.equal(job.last_run.status, "ok");
      assert.equal(job.markers, 1);
    }
    assert.deepEqual(snapshot(state), before, `${args.join(" ")} changed the state dir`);
  }
});

test("a writer's checkpoint under an in-place reader is seen, and the next open reads a copy", async (t) => {
  const { state, file } = await restingStore(t);
  const seen = inChild(
    `const s = open(true);
out.memory = s.db.memory;
out.pausedBefore = s.db.prepare("SELECT paused FROM jobs WHERE name = 'a'").pluck().get();
out.changedBefore = s.changedSinceOpen();
const { default: Database } = await import("better-sqlite3");
const w = new Database(file);
w.prepare("UPDATE jobs SET paused = 1 WHERE name = 'a'").run();
w.close(); // the last connection: checkpoints the WAL into the file and removes it
out.changedAfter = s.changedSinceOpen();
await s.close();
const again = open(true);
out.againMemory = again.db.memory;
out.pausedAgain = again.db.prepare("SELECT paused FROM jobs WHERE name = 'a'").pluck().get();
await again.close();`,
    state,
    file,
  );
  assert.equal(seen.memory, false);
  assert.equal(seen.pausedBefore, 0);
  assert.equal(seen.changedBefore, false);
  assert.equal(seen.changedAfter, true, "the checkpoint into the file is seen");
  assert.equal(seen.againMemory, true, "a file written within the second is copied");
  assert.equal(seen.pausedAgain, 1);
  assert.deepEqual(
    fs.readdirSync(state).filter((n) => n.startsWith("cronvisor.db")),
    ["cronvisor.db"],
  );
});

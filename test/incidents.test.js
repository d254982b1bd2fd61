// The three incidents cronvisor exists to prevent, reproduced with real processes:
//   1. a worker killed mid-way restarts at item zero (kill test, several times in a row);
//   2. a done-marker gated on a flaky later step repeats the side effect on every retry;
//   3. a writer that lost its lock keeps writing (fence refusal), plus two writers at once.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import {
  BIN,
  ROOT,
  cleanEnv,
  cli,
  readStoreIn,
  startDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { PATH, killTest, lines } from "./kill-harness.js";

// The Node library job (examples/enrich.mjs): 200 items, no process per item, so three rounds
// of five kills fit in CI.
for (let round = 1; round <= 3; round++) {
  test(`kill test, round ${round}: 200 items, 5 SIGKILLs of daemon and job, every item done, repeats <= kills`, async (t) => {
    await killTest(t, {
      kills: 5,
      items: 200,
      command: `[node, ${path.join(ROOT, "examples", "enrich.mjs")}]`,
    });
  });
}

// The shell job (examples/enrich.sh): every item is a `cronvisor once` process, the pattern a
// crontab user writes. Fewer items: each call is a Node start-up.
test("kill test, shell job with `cronvisor once` per item: 3 SIGKILLs, every item done, repeats <= kills", async (t) => {
  await killTest(t, { kills: 3, items: 40, command: path.join(ROOT, "examples", "enrich.sh") });
});

test("upload then a flaky downstream step, run 20 times: each file uploaded exactly once", (t) => {
  const dir = tmpdir(t);
  const uploaded = path.join(dir, "uploaded.txt");
  const cfg = writeConfig(
    dir,
    `env: { PATH: "${PATH}", FLAKY: "1", UPLOADED: "${uploaded}", OUTBOX: "${path.join(dir, "outbox")}" }
jobs:
  upload:
    schedule: "*/2 * * * *"
    command: ${path.join(ROOT, "examples", "upload.sh")}
`,
  );
  for (let i = 0; i < 20; i++) {
    const r = cli(["run", "upload", "-c", cfg]);
    assert.equal(r.code, 1, "the downstream step fails every time");
  }
  assert.deepEqual(lines(uploaded).sort(), ["file-1.txt", "file-2.txt", "file-3.txt"]);
  const h = JSON.parse(cli(["history", "upload", "-c", cfg, "--json", "--limit", "20"]).stdout);
  assert.equal(h.length, 20);
  assert.equal(h.at(-1).markers_new, 3, "the first run marked each upload right after it");
  assert.ok(
    h.slice(0, 19).every((r) => r.markers_new === 0 && r.markers_skipped === 3),
    "later runs skip all three",
  );
});

test("two writers at once: manual runs racing scheduled ticks never overlap and no slot runs twice", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s\njobs:\n  w:\n    schedule: "* * * * * *"\n    command: sleep 0.3\n`,
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => readStoreIn(dir).runs({ status: "ok" }).length >= 1, "a scheduled run");
  const codes = await Promise.all(
    Array.from(
      { length: 12 },
      () =>
        new Promise((resolve) => {
          const c = spawn(process.execPath, [BIN, "run", "w", "-c", cfg], {
            env: cleanEnv(),
            stdio: "ignore",
          });
          c.on("exit", (code) => resolve(code));
        }),
    ),
  );
  d.kill("SIGTERM");
  await d.exited;
  assert.ok(
    codes.every((c) => c === 0 || c === 75),
    `exit codes ${codes}`,
  );
  assert.ok(codes.includes(75), "some manual runs found the lock held");
  const runs = readStoreIn(dir)
    .runs({ status: ["ok", "killed"] })
    .sort((a, b) => a.started_at - b.started_at);
  for (let i = 1; i < runs.length; i++) {
    assert.ok(
      runs[i].started_at >= runs[i - 1].finished_at,
      `run ${runs[i].id} started before run ${runs[i - 1].id} ended: ${JSON.stringify(
        readStoreIn(dir)
          .runs()
          .filter((r) => r.id >= runs[i - 1].id - 1 && r.id <= runs[i].id + 1)
          .map(
            ({ id, trigger, status, reason, started_at, finished_at, pid, pgid, owner_pid }) => ({
              id,
              trigger,
              status,
              reason,
              started_at,
              finished_at,
              pid,
              pgid,
              owner_pid,
            }),
          ),
      )}`,
    );
  }
  assert.deepEqual(
    // One job: its slots doubled are the store's.
    readStoreIn(dir).doubled(),
    [],
  );
});

test("belt and suspenders: unmark everything and rerun; the job's own keyed, fenced writes still write nothing twice", (t) => {
  const dir = tmpdir(t);
  const db = path.join(dir, "warehouse.db");
  const cfg = writeConfig(
    dir,
    `env: { PATH: "${PATH}", WAREHOUSE_DB: "${db}", ITEMS: "30", NODE_PATH: "${path.join(ROOT, "node_modules")}" }
jobs:
  load:
    schedule: "@daily"
    command: [node, ${path.join(ROOT, "examples", "warehouse-job.mjs")}]
`,
  );
  const first = cli(["run", "load", "-c", cfg]);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /wrote 30 new rows/);
  const keys = JSON.parse(cli(["markers", "load", "-c", cfg, "--json"]).stdout).map((m) => m.key);
  assert.equal(keys.length, 30);
  for (const k of keys) assert.equal(cli(["unmark", "load", k, "-c", cfg]).code, 0);
  assert.equal(JSON.parse(cli(["markers", "load", "-c", cfg, "--json"]).stdout).length, 0);
  const second = cli(["run", "load", "-c", cfg]);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, /wrote 0 new rows/);
  const w = new Database(db, { readonly: true });
  assert.equal(w.prepare("SELECT COUNT(*) n FROM rows").get().n, 30);
  assert.equal(
    w.prepare("SELECT fence FROM guard").get().fence,
    2,
    "the store saw the second run's fence",
  );
  w.close();
  // The unmarks are recorded for the operator to see.
  assert.match(cli(["history", "load", "-c", cfg]).stdout, /unmark/);
});

// The daemon's monitor on a shared store: another node's running run is judged by that node's
// lease, not by this machine's processes (so it can be stuck, and alerted as such), and a run
// recorded `fenced` is alerted as `interrupted`, as DESIGN.md says alerts treat it.
// In-process, on a SQLite store that stands in for a shared one: its `shared`, `node` and
// `nodes()` are what a PostgreSQL store answers (test/nodes*.test.js drive the real thing).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { parseConfig } from "../dist/config/config.js";
import { Monitor } from "../dist/monitor/monitor.js";
import { SqliteStore } from "../dist/store/sqlite-store.js";
import { plantRun, setRun, tmpdir, waitFor, writeConfig } from "./helpers.js";

const node = (name, renewedAt, now) => ({
  name,
  pid: 4242,
  host: name,
  started_at: renewedAt - 60_000,
  heartbeat_at: renewedAt,
  heartbeat_ms: 1000,
  renewed_at: renewedAt,
  lease_ms: 30_000,
  stopped_at: null,
  version: "0.1.0",
  db_now: now,
});

test("monitor: another node's live run can be stuck; a fenced run is alerted as interrupted", async (t) => {
  const dir = tmpdir(t);
  fs.writeFileSync(
    path.join(dir, "notify.sh"),
    '#!/bin/sh\necho "event=$CRONVISOR_EVENT run=$CRONVISOR_RUN_ID message=$CRONVISOR_MESSAGE" >> alerts.log\n',
    { mode: 0o755 },
  );
  const file = writeConfig(
    dir,
    `alerts:
  - command: ./notify.sh
jobs:
  remote:
    schedule: "0 3 * * *"
    command: "true"
    health: { progress_within: 1m }
`,
  );
  const { config, errors } = parseConfig(fs.readFileSync(file, "utf8"), file, {
    hostTimezone: "UTC",
  });
  assert.deepEqual(errors, []);
  const store = SqliteStore.open(config.stateDir, { create: true });
  t.after(() => store.close());
  const t0 = Date.now();
  await store.ensureJob("remote", t0 - 600_000);
  // n2 renewed its lease a second ago: its run is live wherever it is judged from.
  let n2RenewedAt = t0 - 1000;
  Object.defineProperty(store, "shared", { value: true });
  store.nodes = async () => [node(store.node, t0, Date.now()), node("n2", n2RenewedAt, Date.now())];

  // A run of n2, started 5 minutes ago with no progress since; its pid means nothing here.
  const db = new Database(path.join(config.stateDir, "cronvisor.db"));
  t.after(() => db.close());
  const running = plantRun(db, {
    job: "remote",
    slot: t0 - 300_000,
    trigger: "schedule",
    status: "running",
    started_at: t0 - 300_000,
    finished_at: null,
    fence: 1,
    owner_pid: 999999,
    pid: 999999,
    pgid: 999999,
    node: "n2",
    reason: null,
  });

  const m = new Monitor(config, { log: () => {} });
  t.after(() => m.stop());
  await m.hooks.beat(store, config, t0);
  const log = path.join(dir, "alerts.log");
  const events = () => (fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "");
  await waitFor(() => /^event=stuck /m.test(events()), "a stuck alert for n2's live run");
  assert.match(events(), new RegExp(`^event=stuck run=${running} `, "m"));

  // n2 is taken over: its run is recorded fenced (after the monitor began watching).
  n2RenewedAt = t0 - 120_000;
  setRun(db, running, {
    status: "fenced",
    finished_at: t0 + 2000,
    reason: "node n2 lost its lease",
  });
  await m.hooks.beat(store, config, t0 + 3000);
  await waitFor(
    () => /^event=interrupted /m.test(events()),
    "an interrupted alert for the fenced run",
  );
  assert.match(
    events(),
    new RegExp(
      `^event=interrupted run=${running} message=remote interrupted: run ${running} was fenced \\(node n2 lost its lease\\)$`,
      "m",
    ),
  );
  await m.hooks.beat(store, config, t0 + 4000);
  assert.equal(events().match(/^event=interrupted /gm).length, 1, "one alert for one fenced run");
});

// `cronvisor backfill`: the plan on its own (pure), then the built CLI on real stores: a dry run
// lists, --max refuses and runs nothing, a failure stops the range unless --keep-going, a
// backfill SIGKILLed mid-range resumes without repeating its ok slots (SQLite), and the same
// range on a PostgreSQL store while a daemon runs.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { edgeInstant, planBackfill } from "../dist/daemon/backfill.js";
import { parseIsoTime } from "../dist/schedule/zone.js";
import {
  ROOT,
  cli,
  readPgStore,
  readStoreIn,
  spawnCli,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { freshDatabase, pgMissing, rawClient } from "./pg.js";
import { needs } from "./needs.js";

const H = 3600_000;
const T0 = Date.parse("2026-01-01T00:00:00Z");
const hourly = { pattern: "0 * * * *", timezone: "UTC" };

test("planBackfill: both ends included, ok slots skipped, later slots left to the schedule, --max refuses", () => {
  const runs = [
    { slot: T0 + H, ok: true, attempt: 1 },
    { slot: T0 + 2 * H, ok: false, attempt: 2 },
  ];
  const p = planBackfill(hourly, T0, T0 + 4 * H, runs, T0 + 3 * H + 1, 10);
  assert.deepEqual(p, {
    kind: "plan",
    run: [
      { slot: T0, attempt: 1 },
      { slot: T0 + 2 * H, attempt: 3 },
      { slot: T0 + 3 * H, attempt: 1 },
    ],
    done: [T0 + H],
    future: 1,
  });
  // Not on a slot: the range's slots only.
  assert.deepEqual(planBackfill(hourly, T0 + 1, T0 + H - 1, [], T0 + 9 * H, 10), {
    kind: "plan",
    run: [],
    done: [],
    future: 0,
  });
  assert.deepEqual(planBackfill(hourly, T0, T0 + 10 * H, [], T0 + 99 * H, 3), {
    kind: "too-many",
    count: 4,
  });
  // The ok slots do not count against --max.
  const oks = [0, 1, 2].map((i) => ({ slot: T0 + i * H, ok: true, attempt: 1 }));
  assert.equal(planBackfill(hourly, T0, T0 + 4 * H, oks, T0 + 99 * H, 2).kind, "plan");
});

test("edgeInstant: local times in the job's zone; a DST repeat's range holds both instants; an offset is exact", () => {
  const at = (s) => parseIsoTime(s);
  const zone = "Europe/Berlin";
  // 2026-10-25 02:30 happens twice in Berlin: at 00:30Z and 01:30Z.
  assert.equal(
    new Date(edgeInstant(at("2026-10-25T02:30"), zone, "from")).toISOString(),
    "2026-10-25T00:30:00.000Z",
  );
  assert.equal(
    new Date(edgeInstant(at("2026-10-25T02:30"), zone, "to")).toISOString(),
    "2026-10-25T01:30:00.000Z",
  );
  assert.equal(
    new Date(edgeInstant(at("2026-03-01T02:00+05:00"), zone, "from")).toISOString(),
    "2026-02-28T21:00:00.000Z",
  );
  // 2026-03-29 02:30 does not exist in Berlin: the jump's instant, 01:00Z.
  assert.equal(
    new Date(edgeInstant(at("2026-03-29T02:30"), zone, "to")).toISOString(),
    "2026-03-29T01:00:00.000Z",
  );
});

const NODE_DIR = path.dirname(process.execPath);
const ENV = `env: { PATH: "${path.join(ROOT, "bin")}:${NODE_DIR}:/usr/bin:/bin" }`;

/**
 * A job whose side effect is guarded by a marker per slot (`once`), as the README says to write
 * one: work.txt gets a line per slot actually done; runs.txt a line per run.
 */
function config(dir, command, top = "") {
  return writeConfig(
    dir,
    `${top}
timezone: UTC
${ENV}
jobs:
  fill:
    schedule: "0 * * * *"
    command: ${JSON.stringify(command)}
`,
  );
}
const lines = (file) =>
  fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

test("backfill: --dry-run lists and runs nothing; --max refuses and runs nothing; a failure stops the range unless --keep-going", (t) => {
  const dir = tmpdir(t);
  // 02:00 fails (until fixed); every run says its slot and trigger.
  const cfg = config(
    dir,
    'echo "$CRONVISOR_SLOT $CRONVISOR_TRIGGER" >> runs.txt; case "$CRONVISOR_SLOT" in *T02:00*) test -e fixed;; esac',
  );
  const range = ["--from", "2026-01-01T00:00", "--to", "2026-01-01T04:00", "-c", cfg];
  const runs = path.join(dir, "runs.txt");

  let r = cli(["backfill", "fill", ...range, "--dry-run"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(
    r.stdout.split("\n").filter((l) => l.startsWith("would run")),
    [0, 1, 2, 3, 4].map((h) => `would run  2026-01-01T0${h}:00:00.000Z`),
  );
  assert.deepEqual(lines(runs), []);

  r = cli(["backfill", "fill", ...range, "--max", "4"]);
  assert.equal(r.code, 2);
  assert.match(
    r.stderr,
    /refused: more than 4 slots of fill .* have no ok run \(--max 4\); nothing was run/,
  );
  assert.deepEqual(lines(runs), []);
  assert.equal(
    fs.existsSync(path.join(dir, ".cronvisor", "cronvisor.db")),
    false,
    "a refusal writes nothing",
  );

  // Stops at the first failure: 00:00, 01:00 ok, 02:00 failed, nothing after.
  r = cli(["backfill", "fill", ...range]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(
    r.stdout,
    /fill: 2 ok, 1 failed, 2 not run \(stopped at the first failure; --keep-going runs on\)/,
  );
  assert.deepEqual(
    lines(runs),
    ["00", "01", "02"].map((h) => `2026-01-01T${h}:00:00.000Z backfill`),
  );

  // --keep-going: 02:00 fails again (its second attempt), 03:00 and 04:00 run; exit 1.
  r = cli(["backfill", "fill", ...range, "--keep-going"]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, /fill: 2 ok, 1 failed;/);
  assert.deepEqual(
    lines(runs).slice(3),
    ["02", "03", "04"].map((h) => `2026-01-01T${h}:00:00.000Z backfill`),
  );

  // Fixed: only 02:00 is left; then nothing is.
  fs.writeFileSync(path.join(dir, "fixed"), "");
  r = cli(["backfill", "fill", ...range]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /1 slot\(s\) to run .* 4 already ok/);
  r = cli(["backfill", "fill", ...range]);
  assert.equal(r.code, 0);
  assert.match(r.stdout, /0 slot\(s\) to run .* 5 already ok.*: nothing to run/);
  const hist = readStoreIn(dir).runs({ job: "fill", slot: T0 + 2 * H });
  assert.deepEqual(
    hist.map((h) => [h.status, h.attempt, h.trigger]),
    [
      ["failed", 1, "backfill"],
      ["failed", 2, "backfill"],
      ["ok", 3, "backfill"],
    ],
  );
  // The slots were claimed (a daemon's catch-up finds them taken) without moving the slot stamp.
  assert.equal(readStoreIn(dir).slots({ job: "fill" }).length, 5);
  assert.equal(readStoreIn(dir).job("fill").scanned_to, null);

  // Bad usage: exit 2, with the flag named.
  r = cli(["backfill", "fill", "--from", "yesterday", "--to", "2026-01-01T04:00", "-c", cfg]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--from "yesterday": not an ISO-8601 time/);
  r = cli([
    "backfill",
    "fill",
    "--from",
    "2026-01-02T00:00",
    "--to",
    "2026-01-01T04:00",
    "-c",
    cfg,
  ]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /is before --from/);
});

test("backfill: SIGKILLed mid-range, run again, it resumes: no ok slot runs twice, and markers skip the killed slot's done work", async (t) => {
  const dir = tmpdir(t);
  // Each run does its slot's work once (marker per slot), then waits for a go file for its
  // slot (so the test decides when each run ends), then says it ended.
  const cfg = config(
    dir,
    'cronvisor once "w-$CRONVISOR_SLOT" -- sh -c \'echo "$CRONVISOR_SLOT" >> work.txt\' && while ! test -e "go-$CRONVISOR_SLOT"; do sleep 0.05; done; echo "$CRONVISOR_SLOT" >> ended.txt',
  );
  const slot = (h) => `2026-01-01T0${h}:00:00.000Z`;
  const go = (h) => fs.writeFileSync(path.join(dir, `go-${slot(h)}`), "");
  const work = path.join(dir, "work.txt");
  const range = ["--from", "2026-01-01T00:00Z", "--to", "2026-01-01T03:00Z", "-c", cfg];

  const b = spawnCli(["backfill", "fill", ...range]);
  t.after(() => b.kill("SIGKILL"));
  go(0);
  go(1);
  // 00:00 and 01:00 end ok; 02:00 has done its work, marked it, and waits: kill the backfill
  // now. (Killed between the work and its marker, the work would be done again: at least once.)
  await waitFor(
    () => readStoreIn(dir).markers({ job: "fill", key: `w-${slot(2)}` }).length,
    "the third slot's marker",
    30_000,
  );
  assert.deepEqual(lines(work), [slot(0), slot(1), slot(2)]);
  b.kill("SIGKILL");
  await b.exited;
  // The orphaned run of 02:00 lives on and holds the lock until it ends; let it end.
  go(2);
  await waitFor(() => lines(path.join(dir, "ended.txt")).includes(slot(2)), "the orphan ended");

  go(3);
  const r = cli(["backfill", "fill", ...range]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  // 00:00 and 01:00 were ok: not run again. 02:00 (its run's supervisor died) and 03:00 run.
  assert.match(r.stdout, /2 slot\(s\) to run .* 2 already ok/);
  const runsOf = (h) => readStoreIn(dir).runs({ job: "fill", slot: T0 + h * H });
  assert.deepEqual(
    runsOf(0).map((x) => x.status),
    ["ok"],
  );
  assert.deepEqual(
    runsOf(1).map((x) => x.status),
    ["ok"],
  );
  assert.deepEqual(
    runsOf(2).map((x) => [x.status, x.attempt]),
    [
      ["interrupted", 1],
      ["ok", 2],
    ],
  );
  assert.deepEqual(
    runsOf(3).map((x) => x.status),
    ["ok"],
  );
  // Each slot's work was done once: the rerun of 02:00 found its marker.
  assert.deepEqual(lines(work), [slot(0), slot(1), slot(2), slot(3)]);
  assert.equal(
    readStoreIn(dir).runs({ job: "fill", slot: T0 + 2 * H, status: "ok" })[0].markers_skipped,
    1,
  );
});

test(
  "backfill on a PostgreSQL store while a daemon runs: each slot once, trigger backfill, CRONVISOR_SLOT the slot; the lock held exits 75",
  needs(pgMissing()),
  async (t) => {
    const url = await freshDatabase();
    const dir = tmpdir(t);
    const cfg = config(
      dir,
      'echo "$CRONVISOR_SLOT $CRONVISOR_TRIGGER" >> runs.txt; while test -e hold; do sleep 0.05; done',
      `store: "${url}"\nnode: n1\nheartbeat: 1s`,
    );
    const d = startDaemon(t, cfg);
    await waitFor(() => /daemon \d+ started/.test(d.err), "the daemon started", 30_000);
    const range = ["--from", "2026-01-01T00:00Z", "--to", "2026-01-01T02:00Z", "-c", cfg];
    let r = cli(["backfill", "fill", ...range]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(
      lines(path.join(dir, "runs.txt")),
      ["00", "01", "02"].map((h) => `2026-01-01T${h}:00:00.000Z backfill`),
    );
    r = cli(["backfill", "fill", ...range]);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /nothing to run/);
    const store = readPgStore(await rawClient(url, t));
    const got = (await store.runs({ job: "fill" })).sort((a, b) => a.slot - b.slot);
    assert.deepEqual(
      got.map((x) => [x.slot, x.status, x.trigger]),
      [0, 1, 2].map((h) => [T0 + h * H, "ok", "backfill"]),
    );
    // A run of the job holds the lock: 75, and the slot stays free (no row, no claim).
    fs.writeFileSync(path.join(dir, "hold"), "");
    const held = spawnCli(["run", "fill", "-c", cfg]);
    t.after(() => held.kill("SIGKILL"));
    await waitFor(() => lines(path.join(dir, "runs.txt")).length === 4, "the manual run started");
    r = cli([
      "backfill",
      "fill",
      "--from",
      "2026-01-01T03:00Z",
      "--to",
      "2026-01-01T03:00Z",
      "-c",
      cfg,
    ]);
    assert.equal(r.code, 75, r.stdout + r.stderr);
    assert.match(r.stderr, /fill is running: run \d+ .* holds the lock; nothing was started/);
    assert.equal((await store.slots({ job: "fill", slot: T0 + 3 * H })).length, 0);
    fs.rmSync(path.join(dir, "hold"));
    assert.equal((await held.exited).code, 0);
    await stopDaemon(d);
  },
);

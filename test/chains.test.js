// Chains (`then:`, `then_on_failure:`), the drain (`pause --all`) and blackouts, end to end: real
// daemons, real jobs, on both engines (SQLite in a temp dir, PostgreSQL on test/pg.js's cluster).
// The restart tests kill the daemon with the fault hooks of src/daemon/endings.ts and runs.ts.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  cli,
  freePort,
  request,
  readPgStore,
  readStoreIn,
  startDaemon,
  statusJson,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { nodeConfig } from "./nodes-helpers.js";
import { freshDatabase, pgMissing, rawClient } from "./pg.js";
import { needs } from "./needs.js";

/** Each engine: a config of `jobs(dir)` on a fresh store, and its named reads (readStore's, each awaited). */
const ENGINES = [
  {
    name: "sqlite",
    skip: false,
    async setup(t, jobs) {
      const dir = tmpdir(t);
      const port = await freePort();
      const cfg = writeConfig(dir, `heartbeat: 1s\nhttp: 127.0.0.1:${port}\njobs:\n${jobs(dir)}`);
      return { dir, cfg, store: readStoreIn(dir), port };
    },
  },
  {
    name: "postgresql",
    // Skipped (with pgMissing's reason) only where PostgreSQL is not installed and CI is not set:
    // each test passes it through needs().
    skip: pgMissing(),
    async setup(t, jobs) {
      const dir = tmpdir(t);
      const url = await freshDatabase();
      const raw = await rawClient(url, t);
      const port = await freePort();
      const cfg = nodeConfig(dir, "n1", url, jobs(dir), "3s", `http: 127.0.0.1:${port}`);
      return { dir, cfg, store: readPgStore(raw), port };
    },
  },
];

const lines = (file) =>
  fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter(Boolean) : [];

for (const e of ENGINES) {
  test(
    `${e.name}: then / then_on_failure start the downstream job once for the upstream's slot, trigger chained`,
    needs(e.skip),
    async (t) => {
      const { dir, cfg, store } = await e.setup(
        t,
        (dir) => `  extract:
    schedule: "*/2 * * * * *"
    command: "test ! -e ${dir}/fail"
    catchup: skip
    then: [report]
    then_on_failure: [cleanup]
  report:
    schedule: "0 0 1 1 *"
    command: "echo $CRONVISOR_TRIGGER $CRONVISOR_SLOT >> ${dir}/report.out"
  cleanup:
    schedule: "0 0 1 1 *"
    command: "echo $CRONVISOR_SLOT >> ${dir}/cleanup.out"
`,
      );
      const d = startDaemon(t, cfg);
      // The chained run's reason is noted when its chain start is settled, a transaction after its
      // start: a quick run may end first, so wait for both.
      const ok = await waitFor(
        async () =>
          (await store.runs({ job: "report", status: "ok" })).find((r) => r.reason !== null),
        "a chained report run",
      );
      const up = (await store.runs({ job: "extract", slot: ok.slot }))[0];
      assert.equal(up.status, "ok");
      assert.equal(ok.trigger, "chained");
      assert.equal(ok.reason, `chained after extract run ${up.id}`);
      assert.equal(
        lines(path.join(dir, "report.out"))[0],
        `chained ${new Date(ok.slot).toISOString()}`,
      );
      fs.writeFileSync(path.join(dir, "fail"), "");
      const c = await waitFor(
        async () =>
          (await store.runs({ job: "cleanup", status: "ok" })).find((r) => r.reason !== null),
        "a chained cleanup run after a failure",
      );
      const failed = (await store.runs({ job: "extract", slot: c.slot }))[0];
      assert.equal(failed.status, "failed");
      assert.equal(c.reason, `chained after extract run ${failed.id}`);
      await stopDaemon(d);
      // History says it, in JSON too.
      const hist = JSON.parse(cli(["history", "cleanup", "-c", cfg, "--json"]).stdout);
      assert.equal(hist[0].trigger, "chained");
      assert.match(hist[0].reason, /^chained after extract run \d+/);
      const why = JSON.parse(
        cli(["why", "report", "-c", cfg, "--json", "--at", new Date(ok.slot).toISOString()]).stdout,
      );
      assert.equal(why.disposition, "ran");
      assert.match(
        why.explanation.join(" "),
        new RegExp(`Started by a chain: chained after extract run ${up.id} ended`),
      );
      // A failed upstream never starts `then:`; an ok one never `then_on_failure:`.
      const all = await store.runs();
      const wrong = all
        .filter((r) =>
          all.some(
            (u) =>
              u.job === "extract" &&
              u.slot === r.slot &&
              ((r.job === "report" && u.status !== "ok") ||
                (r.job === "cleanup" && u.status === "ok")),
          ),
        )
        .map((r) => ({ job: r.job, slot: r.slot }));
      assert.deepEqual(wrong, []);
    },
  );

  for (const fault of ["die-after-chain-end", "die-before-chain-settle"]) {
    test(
      `${e.name}: a daemon SIGKILLed at ${fault} starts the chain once after a restart, never twice`,
      needs(e.skip),
      async (t) => {
        const { dir, cfg, store } = await e.setup(
          t,
          (dir) => `  extract:
    schedule: "* * * * * *"
    command: "true"
    catchup: skip
    then: [report]
  report:
    schedule: "0 0 1 1 *"
    command: "echo $CRONVISOR_SLOT >> ${dir}/report.out"
`,
        );
        const out = path.join(dir, "report.out");
        const first = startDaemon(t, cfg, { CRONVISOR_FAULT: fault });
        const r = await first.exited;
        assert.equal(r.signal, "SIGKILL", `the fault hook killed the daemon: ${first.err}`);
        const [pending] = await store.chains();
        assert.ok(pending, "the chain start is in the store, written with the upstream's end");
        const slot = pending.slot;
        const up = (await store.runs({ id: pending.upstream_run }))[0];
        assert.equal(up.status, "ok", "the upstream's end is recorded");
        assert.equal(up.slot, slot);
        const second = startDaemon(t, cfg);
        await waitFor(
          async () =>
            (await store.runs({ job: "report", slot, status: "ok" }))[0] &&
            (await store.chains({ job: "report", slot })).length === 0,
          "the chained run of that slot, ended ok, its chain start settled",
        );
        // Later upstream runs chain as usual: wait for one, so the restarted daemon had its chance
        // to start the first slot's chain a second time.
        await waitFor(
          async () =>
            (await store.runs({ job: "report", status: "ok" })).find((r) => r.slot > slot),
          "a later chained run",
        );
        await stopDaemon(second);
        const iso = new Date(slot).toISOString();
        assert.equal(
          lines(out).filter((l) => l === iso).length,
          1,
          `report ran once for ${iso}: ${lines(out)}`,
        );
        const twice = await store.doubled({ job: "report", attempt: 1 });
        assert.deepEqual(twice, []);
      },
    );
  }

  test(
    `${e.name}: pause --all drains (slots skipped with the reason, status WARNING, until ends it), resume --all ends it`,
    needs(e.skip),
    async (t) => {
      const { cfg, store, port } = await e.setup(
        t,
        (dir) => `  tick:
    schedule: "* * * * * *"
    command: "sleep 2; echo done >> ${dir}/tick.out"
    catchup: skip
`,
      );
      const d = startDaemon(t, cfg);
      const running = await waitFor(
        async () => (await store.runs({ status: "running" }))[0],
        "a running run",
      );
      const p = cli(["pause", "--all", "--reason", "db upgrade", "-c", cfg]);
      assert.equal(p.code, 0, p.stderr);
      await waitFor(
        async () => (await store.runs({ reason: "paused (maintenance: db upgrade)" })).length >= 2,
        "slots skipped while drained",
      );
      // The run that was going when the drain began finishes.
      await waitFor(
        async () => (await store.runs({ id: running.id, status: "ok" }))[0],
        "the running run to finish",
      );
      const s = statusJson(cfg);
      assert.equal(s.daemon.drain.reason, "db upgrade");
      assert.equal(s.daemon.drain.until, null);
      assert.match(s.daemon.drain.since, /^\d{4}-\d\d-\d\dT/);
      const check = cli(["status", "--check", "-c", cfg]);
      assert.equal(check.code, 1, check.stdout);
      assert.match(check.stdout, /^WARNING: drained since .* \(maintenance: db upgrade\)/m);
      // While drained, nothing new starts.
      const since = Date.now();
      await waitFor(
        async () => (await store.runs({ status: "skipped" })).find((r) => r.slot > since + 1000),
        "a later slot skipped",
      );
      assert.deepEqual(
        (await store.ran()).filter((r) => r.started_at > since).map((r) => ({ id: r.id })),
        [],
      );
      // The page says it beside its verdict.
      await waitFor(async () => {
        const page = await request(port, { path: "/" });
        return (
          /WARNING: drained since/.test(page.body) &&
          /data-drain/.test(page.body) &&
          /maintenance: db upgrade/.test(page.body)
        );
      }, "the page to show the drain");
      const why = cli(["why", "tick", "-c", cfg]);
      assert.match(why.stdout, /drained by `cronvisor pause --all` \(maintenance: db upgrade\)/);
      const r = cli(["resume", "--all", "-c", cfg]);
      assert.equal(r.code, 0, r.stderr);
      const resumed = Date.now();
      await waitFor(
        async () =>
          (await store.runs()).find((r) => r.started_at > resumed && r.status !== "skipped"),
        "a run after resume --all",
      );
      assert.equal(statusJson(cfg).daemon.drain, null);
      // --until ends it by itself.
      assert.equal(cli(["pause", "--all", "--until", "2s", "-c", cfg]).code, 0);
      const drained = Date.now();
      await waitFor(
        async () =>
          (await store.runs({ reason: "paused (maintenance)" })).find(
            (r) => r.started_at > drained,
          ),
        "a slot skipped under --until",
      );
      await waitFor(
        async () =>
          (await store.runs({ status: ["running", "ok"] })).find(
            (r) => r.started_at > drained + 2500,
          ),
        "runs again once --until passed",
      );
      assert.equal(statusJson(cfg).daemon.drain, null);
      await stopDaemon(d);
    },
  );
}

test("blackouts: slots inside a window are skipped with its name, never caught up; why says so", async (t) => {
  const dir = tmpdir(t);
  // A window around now, in the job's zone (named at the top level), and one that never holds.
  const zone = "Asia/Kolkata";
  const f = new Intl.DateTimeFormat("sv-SE", { timeZone: zone, dateStyle: "short" });
  const today = f.format(new Date());
  const cfg = writeConfig(
    dir,
    `heartbeat: 1s
blackouts: { today: "${today}..${today}" }
jobs:
  tick:
    schedule: "* * * * * *"
    timezone: ${zone}
    command: "true"
    catchup: all
    blackouts: [today, "Mon 00:00-00:01"]
  free:
    schedule: "* * * * * *"
    command: "true"
    blackouts: ["2001-01-01..2001-01-02"]
`,
  );
  const v = cli(["validate", "-c", cfg]);
  assert.equal(v.code, 0, v.stderr);
  const d = startDaemon(t, cfg);
  await waitFor(
    () => readStoreIn(dir).runs({ job: "tick", status: "skipped" }).length >= 2,
    "skipped slots",
  );
  await waitFor(
    () => readStoreIn(dir).runs({ job: "free", status: "ok" }).length >= 2,
    "the other job runs",
  );
  await stopDaemon(d);
  const ticks = readStoreIn(dir).runs({ job: "tick" });
  // Near midnight in Kolkata a slot may fall on the next day: only those may run.
  for (const r of ticks)
    if (f.format(new Date(r.slot)) === today)
      assert.equal(r.reason, "blackout today", JSON.stringify(r));
  const why = JSON.parse(
    cli(["why", "tick", "-c", cfg, "--json", "--at", new Date(ticks[0].slot).toISOString()]).stdout,
  );
  assert.equal(why.disposition, "skipped");
  assert.equal(why.reason, "blackout today");
  assert.match(why.explanation.join(" "), /blackout window today .* never caught up/);
  // A restart within the window catches nothing up (catchup: all): its slots are skipped too.
  const d2 = startDaemon(t, cfg);
  const n = ticks.length;
  await waitFor(
    () => readStoreIn(dir).runs({ job: "tick" }).length >= n + 2,
    "slots after the restart",
  );
  await stopDaemon(d2);
  const caught = readStoreIn(dir)
    .runs({ job: "tick", trigger: "catchup" })
    .filter((r) => r.status !== "skipped");
  assert.deepEqual(
    caught.filter((r) => f.format(new Date(r.slot)) === today),
    [],
  );
});

test("validate: unknown chain and window names, cycles and bad windows, each with file, line and key", (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `blackouts:
  xmas: "2026-12-24..2026-12-26"
  bad: "2026-12-26..2026-12-24"
jobs:
  a:
    schedule: "0 * * * *"
    command: "true"
    then: [b, reprot]
    blackouts: [xmass, "Sat 25:00-06:00"]
  b:
    schedule: "0 * * * *"
    command: "true"
    then_on_failure: [a]
  c:
    schedule: "0 * * * *"
    command: "true"
    then: [c]
`,
  );
  const r = cli(["validate", "-c", cfg]);
  assert.equal(r.code, 2);
  const f = path.join(dir, "jobs.yaml");
  assert.deepEqual(r.stderr.trim().split("\n"), [
    `${f}:3:8: blackouts.bad: bad window: the window ends before it starts (2026-12-26..2026-12-24)`,
    `${f}:8:15: jobs.a.then[1]: no job named "reprot"`,
    `${f}:9:17: jobs.a.blackouts[0]: no blackout window named "xmass" (did you mean "xmas"?)`,
    `${f}:9:24: jobs.a.blackouts[1]: bad window: "25:00-06:00" is not a time range: expected "YYYY-MM-DD..YYYY-MM-DD" (whole days), "YYYY-MM-DD HH:MM..YYYY-MM-DD HH:MM", or "[DAY[-DAY]] HH:MM-HH:MM" (e.g. "Sat 00:00-06:00", "Mon-Fri 22:00-02:00")`,
    `${f}:13:23: jobs.b.then_on_failure[0]: a chain leads back to where it started: a -> b -> a`,
    `${f}:17:12: jobs.c.then[0]: a chain leads back to where it started: c -> c`,
  ]);
});

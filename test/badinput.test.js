// Bad input through the built CLI (issue 7): malformed marker-command arguments, inside a run and
// outside one; an env_file that cannot be read; job names that try path traversal. Each gets a
// clear error and an exact exit code, and writes nothing. (The corpus of broken configs with their
// exact messages is test/config.test.js.)
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { BIN, ROOT, cli, startDaemon, tmpdir, waitFor, writeConfig, readStore } from "./helpers.js";

const FIXTURES = path.join(ROOT, "test", "fixtures", "faults");

/** Each row of `rows` with only the fields `cols`. */
const pick = (rows, ...cols) => rows.map((r) => Object.fromEntries(cols.map((c) => [c, r[c]])));

/** What marker commands may write: markers, claims, attempts, and counts on runs. */
function markerState(stateDir) {
  const s = readStore(stateDir);
  return {
    markers: pick(
      s.markers().sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
      "job",
      "key",
    ),
    claims: pick(s.claims(), "job", "key"),
    attempts: pick(s.attempts(), "job", "key", "count"),
    runs: pick(s.runs(), "id", "markers_new", "markers_skipped", "progress_count"),
  };
}

const USAGE_MARK = "cronvisor: usage: cronvisor mark KEY... | cronvisor mark --stdin\n";
const USAGE_ONCE = "cronvisor: usage: cronvisor once [--wait] KEY -- CMD [ARG...]\n";

test("malformed mark / check / once arguments outside a run: exit 2, a clear message, nothing written", (t) => {
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  const ran = path.join(dir, "ran");
  const cfg = writeConfig(dir, `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n`);
  assert.equal(cli(["run", "a", "-c", cfg]).code, 0, "a store with one run");
  const before = markerState(state);
  const cases = [
    [["mark"], USAGE_MARK],
    [["mark", ""], "cronvisor: a marker key must not be empty\n"],
    [["mark", "ok-1", ""], "cronvisor: a marker key must not be empty\n"],
    [["mark", "line\nbreak"], 'cronvisor: marker key "line\\nbreak" contains a newline or NUL\n'],
    [["mark", "x".repeat(1025)], "cronvisor: a marker key must be at most 1024 characters\n"],
    [["mark", "ok-2", "--bogus"], USAGE_MARK],
    [["mark", "--stdin", "extra"], USAGE_MARK],
    [["check"], /^error: missing required argument 'key'\n/],
    [
      ["check", "k1", "k2"],
      /^error: too many arguments for 'check'\. Expected 1 argument but got 2\.\n/,
    ],
    [["once"], /^error: missing required argument 'key'\n/],
    [["once", "k1"], USAGE_ONCE],
    [["once", "k1", "--"], USAGE_ONCE],
    [["once", "k1", "touch", ran], USAGE_ONCE],
    [["once", "--", "touch", ran], USAGE_ONCE],
    [["once", "", "--", "touch", ran], "cronvisor: a marker key must not be empty\n"],
    [
      ["progress", "working"],
      "cronvisor: progress is reported by a run: call it inside a cronvisor job\n",
    ],
  ];
  for (const [[cmd, ...args], expected] of cases) {
    const r = cli([cmd, "--job", "a", "-c", cfg, ...args]);
    const what = JSON.stringify([cmd, ...args]);
    assert.equal(r.code, 2, `${what}: exit 2 (stderr: ${r.stderr})`);
    if (typeof expected === "string") assert.equal(r.stderr, expected, what);
    else assert.match(r.stderr, expected, what);
    assert.equal(r.stdout, "", what);
  }
  assert.ok(!fs.existsSync(ran), "no command of a malformed `once` ran");
  assert.deepEqual(markerState(state), before, "nothing was written");

  // --stdin commits and acknowledges line by line: a bad line stops it, the lines before stay.
  const s = cli(["mark", "--job", "a", "-c", cfg, "--stdin"], { input: "k1\nk2\u0000x\nk3\n" });
  assert.equal(s.code, 2, s.stderr);
  assert.equal(s.stdout, "k1\n", "only the durable key is acknowledged");
  assert.equal(s.stderr, 'cronvisor: marker key "k2\\u0000x" contains a newline or NUL\n');
  assert.deepEqual(markerState(state).markers, [{ job: "a", key: "k1" }]);

  // A command that cannot be run is its exit code; its key stays unmarked and unclaimed.
  const o = cli(["once", "--job", "a", "-c", cfg, "k9", "--", path.join(dir, "no-such-program")]);
  assert.equal(o.code, 127, o.stderr);
  assert.match(o.stderr, /^cronvisor: cannot run \S+no-such-program: spawn \S+ ENOENT\n$/);
  assert.equal(cli(["check", "--job", "a", "-c", cfg, "k9"]).code, 1, "k9 is not marked");
  assert.deepEqual(markerState(state).claims, [], "the claim was released");
  // Outside the config's jobs, even for a name that looks like a path.
  for (const job of ["nope", "../a"]) {
    const r = cli(["mark", "--job", job, "-c", cfg, "k"]);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, `no job named ${JSON.stringify(job)} in ${cfg} (jobs: a)\n`);
  }
  assert.deepEqual(markerState(state).markers, [{ job: "a", key: "k1" }]);

  // Options may follow the key too (commander used to pass them through as arguments).
  for (const args of [
    ["mark", "k5", "--job", "a", "-c", cfg],
    ["check", "k5", "--job", "a", "-c", cfg],
    ["once", "k6", "--job", "a", "-c", cfg, "--", "true"],
    ["check", "k6", "-c", cfg, "--job", "a"],
  ]) {
    const r = cli(args);
    assert.equal(r.code, 0, `${JSON.stringify(args)}: ${r.stderr}`);
  }
  assert.equal(cli(["check", "k7", "--job", "a", "-c", cfg]).code, 1, "k7 is not marked");

  // Before any daemon or run made the store: `mark --job` makes it (as `pause` does).
  const fresh = tmpdir(t);
  const freshCfg = writeConfig(fresh, `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n`);
  assert.equal(cli(["check", "k1", "--job", "a", "-c", freshCfg]).code, 1, "no store: not marked");
  const first = cli(["mark", "k1", "--job", "a", "-c", freshCfg]);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(cli(["check", "k1", "--job", "a", "-c", freshCfg]).code, 0);
});

test("malformed marker calls inside a run: each exits 2 and the run writes nothing but its one good key", (t) => {
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  const errors = path.join(dir, "errors");
  const ran = path.join(dir, "ran");
  const cfg = writeConfig(
    dir,
    [
      "jobs:",
      "  calls:",
      '    schedule: "@daily"',
      `    command: [${JSON.stringify(path.join(FIXTURES, "bad-marker-calls.sh"))}]`,
      "    env:",
      `      CV_NODE: ${JSON.stringify(process.execPath)}`,
      `      CV_BIN: ${JSON.stringify(BIN)}`,
      `      CV_ERRORS: ${JSON.stringify(errors)}`,
      `      CV_RAN: ${JSON.stringify(ran)}`,
      "",
    ].join("\n"),
  );
  const r = cli(["run", "calls", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout,
    [
      "mark-no-key=2",
      "mark-empty-key=2",
      "mark-one-empty-key=2",
      "mark-newline=2",
      "mark-unknown-option=2",
      "mark-stdin-extra=2",
      "check-no-key=2",
      "check-two-keys=2",
      "once-nothing=2",
      "once-no-command=2",
      "once-empty-command=2",
      "once-no-separator=2",
      "once-no-key=2",
      "progress-two-args=2",
      "mark-bad-fence-env=2",
      "mark-good=0",
      "",
    ].join("\n"),
  );
  const messages = fs.readFileSync(errors, "utf8").trim().split("\n");
  assert.equal(messages.length, 15, messages.join("\n"));
  for (const m of messages)
    assert.match(
      m,
      /^cronvisor: (usage: |a marker key must not be empty|marker key "line\\nbreak" contains a newline or NUL|not inside a cronvisor run)/,
    );
  assert.ok(!fs.existsSync(ran));
  const st = markerState(state);
  assert.deepEqual(st.markers, [{ job: "calls", key: "good" }]);
  assert.deepEqual(st.claims, []);
  assert.deepEqual(st.attempts, []);
  assert.deepEqual(
    st.runs.map((x) => [x.markers_new, x.markers_skipped, x.progress_count]),
    [[1, 0, 0]],
  );
});

test("an env_file that cannot be read (a directory, a missing file, a bad line): spawn_failed naming the file; the daemon serves the rest and recovers when it is fixed", async (t) => {
  const dir = tmpdir(t);
  const state = path.join(dir, ".cronvisor");
  fs.mkdirSync(path.join(dir, "envdir"));
  const badEnv = path.join(FIXTURES, "bad.env");
  const cfg = writeConfig(
    dir,
    [
      "heartbeat: 1s",
      "defaults: { catchup: skip, log: { keep_runs: 100000 } }",
      "jobs:",
      "  direnv:",
      '    schedule: "* * * * * *"',
      '    command: "true"',
      "    env_file: envdir",
      "  later:",
      '    schedule: "* * * * * *"',
      "    command: echo token=$TOKEN",
      "    env_file: later.env",
      "  badline:",
      '    schedule: "* * * * * *"',
      '    command: "true"',
      `    env_file: ${badEnv}`,
      "  fine:",
      '    schedule: "* * * * * *"',
      "    command: echo fine",
      "",
    ].join("\n"),
  );
  const d = startDaemon(t, cfg);
  const broken = ["direnv", "later", "badline"];
  await waitFor(
    () =>
      broken.every((j) => readStore(state).runs({ job: j, status: "spawn_failed" }).length >= 2) &&
      readStore(state).runs({ job: "fine", status: "ok" }).length >= 2,
    "failures recorded and the fine job running",
  );
  const reasons = {
    direnv: (id) =>
      `spawn failed: env_file ${dir}/envdir: not a regular file (job: direnv, run: ${id})`,
    later: (id) =>
      `spawn failed: env_file ${dir}/later.env: cannot read: ENOENT (job: later, run: ${id})`,
    badline: (id) => `spawn failed: ${badEnv}:3: expected KEY=value (job: badline, run: ${id})`,
  };
  for (const j of broken) {
    const runs = readStore(state).ended({ job: j });
    for (const r of runs) {
      assert.equal(r.status, "spawn_failed");
      assert.equal(r.reason, reasons[j](r.id));
      assert.equal(r.pid, null, "no process was started");
    }
    // `cronvisor logs` says why too (it printed nothing before).
    const last = runs.at(-1);
    const logs = cli(["logs", j, "--run", String(last.id), "-c", cfg]);
    assert.equal(logs.code, 0, logs.stderr);
    assert.equal(logs.stdout, `[cronvisor: ${reasons[j](last.id)}]\n`);
  }
  const st = JSON.parse(cli(["status", "-c", cfg, "--json"]).stdout);
  assert.equal(st.daemon.state, "running");
  for (const j of broken) {
    const job = st.jobs.find((x) => x.name === j);
    assert.equal(job.health, "failing");
    assert.match(
      job.problems.join("\n"),
      new RegExp(
        `spawn_failed, spawn failed: .*${j === "badline" ? "bad\\.env:3" : j === "direnv" ? "envdir" : "later\\.env"}`,
      ),
    );
  }
  assert.equal(st.jobs.find((x) => x.name === "fine").health, "ok");

  // The missing file appears: the next run reads it. Written aside and renamed into place: the
  // daemon reads it every second, and a read between the create and the write would see it empty
  // (a run with `token=`).
  fs.writeFileSync(path.join(dir, "later.env.tmp"), "TOKEN=t0k3n\n");
  fs.renameSync(path.join(dir, "later.env.tmp"), path.join(dir, "later.env"));
  const ok = await waitFor(
    () => readStore(state).runs({ job: "later", status: "ok" })[0],
    "later runs once its env_file exists",
  );
  assert.equal(fs.readFileSync(ok.log_path, "utf8"), "token=t0k3n\n");
  d.kill("SIGTERM");
  assert.equal((await d.exited).code, 0, d.err);
  for (const j of [...broken, "fine"]) {
    const dup = readStore(state).doubled({ job: j, trigger: "schedule" });
    assert.deepEqual(dup, [], `${j}: no slot twice`);
  }
});

test("job names that try path traversal: validate and daemon exit 2 with FILE:LINE:COL; CLI names are never paths", (t) => {
  const dir = tmpdir(t);
  const bad = writeConfig(
    dir,
    [
      "jobs:",
      "  ../evil:",
      '    schedule: "@daily"',
      '    command: "true"',
      "  a/b:",
      '    schedule: "@daily"',
      '    command: "true"',
      '  "..":',
      '    schedule: "@daily"',
      '    command: "true"',
      "",
    ].join("\n"),
    "bad.yaml",
  );
  const expected = [
    `${bad}:2:3: jobs: bad job name "../evil": use 1-64 of a-z 0-9 _ . - starting with a letter or digit`,
    `${bad}:5:3: jobs: bad job name "a/b": use 1-64 of a-z 0-9 _ . - starting with a letter or digit`,
    `${bad}:8:3: jobs: bad job name "..": use 1-64 of a-z 0-9 _ . - starting with a letter or digit`,
    "",
  ].join("\n");
  const v = cli(["validate", "-c", bad]);
  assert.equal(v.code, 2);
  assert.equal(v.stderr, expected);
  const d = cli(["daemon", "-c", bad], { timeout: 15_000 });
  assert.equal(d.code, 2);
  assert.equal(d.stderr, expected);
  assert.deepEqual(fs.readdirSync(dir), ["bad.yaml"], "nothing was created");

  const cfg = writeConfig(dir, `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n`);
  for (const args of [
    ["run", "../evil"],
    ["logs", "../evil"],
    ["history", "../evil"],
    ["markers", "../evil"],
    ["pause", "a/b"],
    ["unmark", "..", "k"],
    ["next", "../../etc"],
  ]) {
    const r = cli([...args, "-c", cfg]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr, `no job named ${JSON.stringify(args[1])} in ${cfg} (jobs: a)\n`);
  }
  assert.deepEqual(fs.readdirSync(dir).sort(), ["bad.yaml", "jobs.yaml"], "nothing was created");
  assert.ok(!fs.existsSync(path.join(path.dirname(dir), "evil")));
});

// The validated-config cache that `status` reads (src/config/config-cache.ts): a hit reports
// exactly what a cold parse does; any change to the file's bytes (also at the same size and
// mtime), a corrupt, foreign or others-writable cache, or a cache location that cannot be written
// falls back to a real parse; config errors read the same with a cache present; the daemon
// refreshes it on reload.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  CONFIG_CACHE_FILE,
  guessStateDir,
  loadConfigCached,
  statusView,
} from "../dist/config/config-cache.js";
import { loadConfig } from "../dist/config/config.js";
import { STATUS_JOB_KEYS } from "../dist/core/types.js";
import {
  cli,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";

const YAML = [
  "state_dir: ./state # the store",
  "timezone: UTC",
  "env: { A: one }",
  "defaults: { timeout: 10m, overlap: skip }",
  "jobs:",
  "  nightly:",
  '    schedule: "0 2 * * *"',
  '    command: "true"',
  "    health: { success_within: 26h, repeat_limit: 3 }",
  "  fails:",
  '    schedule: "*/5 * * * *"',
  "    command: exit 3",
  "  argv:",
  '    schedule: "@reboot"',
  '    command: ["/bin/echo", "hi"]',
  "    paused: true",
  "",
].join("\n");

/** A config in a fresh dir with a store holding one ok and one failed run (no daemon). */
function setup(t, text = YAML) {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, text);
  assert.equal(cli(["run", "nightly", "-c", cfg]).code, 0);
  assert.equal(cli(["run", "fails", "-c", cfg]).code, 3);
  const state = path.join(dir, "state");
  return { dir, cfg, state, cache: path.join(state, CONFIG_CACHE_FILE) };
}

function status(cfg, ...args) {
  return cli(["status", "-c", cfg, ...args]);
}

/**
 * A report with the file system's free space blanked: a live reading (daemon.disk.free_bytes)
 * that other writers on this machine move between two calls.
 */
const steady = (out) =>
  out.replace(/"free_bytes": \d+/g, '"free_bytes": 0').replace(/[\d.]+ [KMGT]?B free/g, "N free");

function statusJson(cfg) {
  const r = status(cfg, "--json");
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** Change the cached config (its key untouched), so a report shows whether the cache was used. */
function tamper(cache) {
  const c = JSON.parse(fs.readFileSync(cache, "utf8"));
  c.config.jobs[0].schedule = "TAMPERED";
  fs.writeFileSync(cache, JSON.stringify(c));
  return c;
}
const nightly = (report) => report.jobs.find((j) => j.name === "nightly");

test("a cache hit reports exactly what a cold parse does, and is really used", (t) => {
  const { cfg, cache } = setup(t);
  assert.equal(fs.existsSync(cache), false, "`run` does not write the cache");
  const cold = status(cfg, "--json");
  assert.equal(cold.code, 0, cold.stderr);
  const st = fs.statSync(cache);
  assert.equal(st.mode & 0o777, 0o600);
  const hit = status(cfg, "--json");
  assert.equal(hit.code, 0, hit.stderr);
  assert.equal(steady(hit.stdout), steady(cold.stdout));
  assert.equal(hit.stderr, cold.stderr);
  assert.equal(JSON.parse(hit.stdout).jobs.length, 3);
  // The human view and --check read the same config.
  const human = [status(cfg), status(cfg)];
  const ages = (x) => steady(x.replace(/\d+[smhd] ago/g, "N ago"));
  assert.equal(ages(human[0].stdout), ages(human[1].stdout));
  assert.equal(human[0].code, 0);
  const check = status(cfg, "--check");
  assert.equal(check.code, 2, check.stdout); // no daemon: CRITICAL, with or without a cache
  assert.match(check.stdout, /^CRITICAL: daemon down/);

  tamper(cache);
  assert.equal(nightly(statusJson(cfg)).schedule, "TAMPERED", "the cache was not used");
});

test("every view of status reads the same from the cut cache as from a parse", async (t) => {
  // Jobs that use what status reads: health thresholds that judge (failing, late), a repeat
  // limit, paused, a zone for the next slot, @reboot (no pattern), hosts, overlap; beside keys
  // status does not read (cut from the cache).
  const { cfg, cache } = setup(
    t,
    [
      "state_dir: ./state",
      "timezone: UTC",
      "node: a",
      "defaults: { overlap: allow }",
      "jobs:",
      "  nightly:",
      '    schedule: "0 2 * * *"',
      '    command: "true"',
      "    timezone: Asia/Kolkata",
      "    health: { success_within: 1s, progress_within: 1s, repeat_limit: 1 }",
      "    hosts: [a, b]",
      "  fails:",
      '    schedule: "*/5 * * * *"',
      "    command: exit 3",
      "    overlap: queue",
      "    retries: { attempts: 2, backoff: 1s }",
      "    env: { X: y }",
      "  argv:",
      '    schedule: "@reboot"',
      '    command: ["/bin/echo", "hi"]',
      "    paused: true",
      "",
    ].join("\n"),
  );
  const views = [
    ["--json"],
    [],
    ["nightly"],
    ["fails", "--json"],
    ["--check"],
    ["--check", "--json"],
  ];
  const ages = (x) =>
    steady(x.replace(/\d+[smhd] ago/g, "N ago").replace(/"[a-z_]+age_s": [\d.]+/g, "age"));
  // success_within 1s: nightly turns late a second after its run. Each pair of calls must see
  // the same side of that second, so they start once it has passed (it stays late).
  await waitFor(() => nightly(statusJson(cfg)).health === "late", "nightly late");
  for (const args of views) {
    fs.rmSync(cache, { force: true });
    const cold = status(cfg, ...args);
    assert.ok(fs.existsSync(cache), `${args}: written after the miss`);
    const hit = status(cfg, ...args);
    assert.equal(hit.code, cold.code, `${args}: ${hit.stderr}`);
    assert.equal(ages(hit.stdout), ages(cold.stdout), `${args}`);
    assert.equal(hit.stderr, cold.stderr, `${args}`);
  }
  const report = statusJson(cfg);
  assert.deepEqual(
    report.jobs.map((j) => [j.name, j.health, j.paused]),
    [
      ["nightly", "late", false],
      ["fails", "failing", false],
      ["argv", "paused", true],
    ],
  );
  const cached = JSON.parse(fs.readFileSync(cache, "utf8")).config.jobs;
  assert.equal(cached[1].command, undefined, "what status does not read is not cached");
  assert.deepEqual(cached[0].hosts, ["a", "b"]);
});

test("the cache holds loadConfig's Config, each job cut to what status reads, for every kind of key", async (t) => {
  const dir = tmpdir(t);
  fs.mkdirSync(path.join(dir, "s"));
  const cfg = writeConfig(
    dir,
    [
      "state_dir: 's'",
      "shell: /bin/bash",
      "env: { PATH: /usr/bin:/bin, X: 'y z' }",
      "heartbeat: 2s",
      "http: 127.0.0.1:9464",
      "alerts:",
      "  - webhook: http://127.0.0.1:8080/hook",
      "  - command: /usr/local/bin/notify",
      "defaults: { timeout: 1h, overlap: queue, kill_grace: 3s }",
      "jobs:",
      "  a:",
      '    schedule: "0 2 * * *"',
      "    command: ./a.sh",
      "    cwd: /srv",
      "    env: { MODE: nightly }",
      "    env_file: ./a.env",
      "    timezone: Europe/Berlin",
      "    timeout: 30m",
      "    catchup: all",
      "    catchup_window: 6h",
      "    jitter: 30s",
      "    retries: { attempts: 3, backoff: 30s }",
      "    health: { success_within: 26h, progress_within: 10m, repeat_limit: 5 }",
      "    log: { max_size: 10MB, keep_runs: 7 }",
      "    ping: https://hc-ping.com/x",
      "  b:",
      '    schedule: "@hourly"',
      "    command: [node, -e, '0']",
      "    user: nobody",
      "    overlap: allow",
      "",
    ].join("\n"),
  );
  const real = loadConfig(cfg);
  assert.deepEqual(real.errors, []);
  const first = await loadConfigCached(cfg);
  assert.deepEqual(first, real, "a miss answers with the parse itself");
  assert.ok(fs.existsSync(path.join(dir, "s", CONFIG_CACHE_FILE)), "written after the miss");
  const hit = await loadConfigCached(cfg);
  assert.notDeepEqual(hit, real, "the cache was not used");
  // Every top-level key as parsed; each job with exactly STATUS_JOB_KEYS, their values as parsed.
  const { jobs, ...top } = hit.config;
  const { jobs: realJobs, ...realTop } = real.config;
  assert.deepEqual(top, realTop);
  assert.equal(jobs.length, realJobs.length);
  for (const [i, j] of jobs.entries()) {
    assert.deepEqual(Object.keys(j).sort(), [...STATUS_JOB_KEYS].sort());
    for (const k of STATUS_JOB_KEYS) assert.deepEqual(j[k], realJobs[i][k], `${j.name}.${k}`);
  }
  assert.deepEqual(hit, { config: statusView(real.config), errors: [] });
  assert.deepEqual(JSON.parse(JSON.stringify(real.config)), real.config, "Config is plain JSON");
});

test("editing the YAML invalidates the cache, also at the same size and mtime", (t) => {
  const { cfg, cache } = setup(t);
  statusJson(cfg);
  const before = fs.statSync(cfg);
  tamper(cache);
  assert.equal(nightly(statusJson(cfg)).schedule, "TAMPERED");
  const edited = YAML.replace('"0 2 * * *"', '"0 3 * * *"');
  assert.equal(edited.length, YAML.length);
  fs.writeFileSync(cfg, edited);
  fs.utimesSync(cfg, before.atimeMs / 1000, before.mtimeMs / 1000);
  assert.equal(fs.statSync(cfg).size, before.size);
  assert.ok(Math.abs(fs.statSync(cfg).mtimeMs - before.mtimeMs) < 1, "same mtime");
  assert.equal(nightly(statusJson(cfg)).schedule, "0 3 * * *");
  // ... and the cache now holds the new config.
  assert.equal(JSON.parse(fs.readFileSync(cache, "utf8")).config.jobs[0].schedule, "0 3 * * *");
  assert.equal(nightly(statusJson(cfg)).schedule, "0 3 * * *");
});

test("another host time zone is another key (a config without timezone: takes the host's)", (t) => {
  const { cfg, cache } = setup(t, YAML.replace("timezone: UTC\n", ""));
  const r = cli(["status", "-c", cfg, "--json"], { env: { TZ: "UTC" } });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(nightly(JSON.parse(r.stdout)).timezone, "UTC");
  tamper(cache);
  const berlin = cli(["status", "-c", cfg, "--json"], { env: { TZ: "Europe/Berlin" } });
  assert.equal(berlin.code, 0, berlin.stderr);
  assert.equal(nightly(JSON.parse(berlin.stdout)).timezone, "Europe/Berlin");
  assert.equal(nightly(JSON.parse(berlin.stdout)).schedule, "0 2 * * *");
});

test("a corrupt, truncated, foreign or others-writable cache file is ignored", (t) => {
  const { cfg, cache } = setup(t);
  const good = status(cfg, "--json");
  assert.equal(good.code, 0, good.stderr);
  const valid = fs.readFileSync(cache, "utf8");
  for (const [what, body] of [
    ["garbage", "not json at all \u0000\u00ff"],
    ["truncated", valid.slice(0, Math.floor(valid.length / 2))],
    ["empty", ""],
    ["null", "null"],
    ["no config", JSON.stringify({ key: JSON.parse(valid).key })],
    ["config not an object", JSON.stringify({ key: JSON.parse(valid).key, config: 5 })],
  ]) {
    fs.writeFileSync(cache, body);
    const r = status(cfg, "--json");
    assert.equal(r.code, 0, `${what}: ${r.stderr}`);
    assert.equal(r.stderr, "", what);
    assert.deepEqual(nightly(JSON.parse(r.stdout)), nightly(JSON.parse(good.stdout)), what);
    // The miss rewrote it: valid again.
    assert.deepEqual(JSON.parse(fs.readFileSync(cache, "utf8")), JSON.parse(valid), what);
  }
  // Writable by others: not trusted.
  tamper(cache);
  fs.chmodSync(cache, 0o666);
  assert.equal(nightly(statusJson(cfg)).schedule, "0 2 * * *");
  // Owned by another user (only root can make one): not trusted.
  if (process.getuid() === 0) {
    tamper(cache);
    fs.chownSync(cache, 65534, 65534);
    assert.equal(nightly(statusJson(cfg)).schedule, "0 2 * * *");
  }
});

test("a cache location that cannot be written does not break status", (t) => {
  const { cfg, state, cache } = setup(t);
  const expected = statusJson(cfg);
  // A directory in the way: neither read nor replaced.
  fs.rmSync(cache);
  fs.mkdirSync(path.join(cache, "x"), { recursive: true });
  for (let i = 0; i < 2; i++) {
    const r = status(cfg, "--json");
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, "");
    assert.deepEqual(nightly(JSON.parse(r.stdout)), nightly(expected));
  }
  assert.ok(fs.statSync(cache).isDirectory());
  assert.deepEqual(
    fs.readdirSync(state).filter((f) => f.endsWith(".tmp")),
    [],
    "no temp file left behind",
  );
  fs.rmSync(cache, { recursive: true });
  // A state dir that is not ours (root running status in another user's state dir): no write.
  if (process.getuid() === 0) {
    fs.chownSync(state, 65534, 65534);
    const r = status(cfg, "--json");
    assert.equal(r.code, 0, r.stderr);
    assert.equal(fs.existsSync(cache), false);
    fs.chownSync(state, 0, 0);
  } else {
    // A read-only state dir: SQLite still reads the store, the cache is not written.
    fs.chmodSync(state, 0o500);
    t.after(() => fs.chmodSync(state, 0o700));
    const r = status(cfg, "--json");
    if (r.code === 0) assert.equal(fs.existsSync(cache), false);
  }
});

test("config errors read the same, with the same exit codes, whether or not a cache exists", (t) => {
  const { cfg, cache } = setup(t);
  statusJson(cfg);
  assert.ok(fs.existsSync(cache));
  const broken = YAML.replace('"0 2 * * *"', '"0 2 * *"').replace("exit 3", "exit 3\n    bogus: 1");
  const runs = [];
  for (const withCache of [true, false]) {
    if (!withCache) fs.rmSync(cache, { force: true });
    fs.writeFileSync(cfg, broken);
    const plain = status(cfg, "--json");
    const check = status(cfg, "--check");
    runs.push({ plain, check });
    assert.equal(plain.code, 2, plain.stderr);
    assert.equal(plain.stdout, "");
    assert.match(plain.stderr, /jobs\.nightly\.schedule: /);
    assert.match(plain.stderr, /jobs\.fails: unknown key "bogus"/);
    assert.equal(check.code, 3);
    assert.match(check.stdout, /^UNKNOWN: the config cannot be read/);
    assert.equal(check.stderr, plain.stderr);
  }
  assert.deepEqual(runs[0], runs[1]);
  // The same errors as `validate`, which never uses the cache.
  const v = cli(["validate", "-c", cfg]);
  assert.equal(v.code, 2);
  assert.equal(v.stderr, runs[0].plain.stderr);
  // A file that cannot be read: one error at 1:1, as before.
  const missing = status(path.join(path.dirname(cfg), "nope.yaml"), "--json");
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /nope\.yaml:1:1: \(file\): cannot read: no such file/);
  // Fixed again: the old cache (of other bytes) is not what is used; the parse is.
  fs.writeFileSync(cfg, YAML);
  assert.equal(nightly(statusJson(cfg)).schedule, "0 2 * * *");
});

test("the daemon refreshes the cache on a successful reload and keeps it on a failed one", async (t) => {
  const { cfg, cache, state } = setup(
    t,
    YAML.replace("timezone: UTC", "timezone: UTC\nheartbeat: 1s"),
  );
  const d = startDaemon(t, cfg);
  await waitFor(() => statusJson(cfg).daemon.state === "running", "daemon running");
  fs.rmSync(cache, { force: true });
  const text = fs.readFileSync(cfg, "utf8");
  fs.writeFileSync(cfg, text.replace('"0 2 * * *"', '"0 4 * * *"'));
  const r = cli(["reload", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  // Until the reload's cache is there: the cache the daemon writes as it starts may land after
  // the rmSync above, with the old schedule.
  const written = await waitFor(() => {
    try {
      const c = JSON.parse(fs.readFileSync(cache, "utf8"));
      return c.config.jobs[0].schedule === "0 4 * * *" ? c : null;
    } catch {
      return null;
    }
  }, "the daemon's cache of the reloaded config after SIGHUP");
  assert.equal(written.config.jobs[0].schedule, "0 4 * * *");
  assert.equal(fs.statSync(cache).mode & 0o777, 0o600);
  // status uses what the daemon wrote (proved by a change only the cache has).
  const tampered = tamper(cache);
  assert.equal(nightly(statusJson(cfg)).schedule, "TAMPERED");
  // A reload the daemon refuses leaves the cache alone. status reports the file's errors and
  // works from the config the daemon runs as recorded in its store, not from the cache (issue 12
  // changed this from exit 2: test/config-fallback.test.js).
  fs.writeFileSync(cfg, text.replace('"0 2 * * *"', '"0 2 * *"'));
  d.kill("SIGHUP");
  await waitFor(() => readStore(state).daemon()?.config_error, "the refused reload");
  assert.deepEqual(JSON.parse(fs.readFileSync(cache, "utf8")), tampered);
  const broken = status(cfg, "--json");
  assert.equal(broken.code, 0, broken.stderr);
  assert.match(broken.stderr, /^the config file has errors; the daemon runs the config accepted/);
  const report = JSON.parse(broken.stdout);
  assert.match(report.daemon.config_file_errors[0], /jobs\.nightly\.schedule: /);
  assert.equal(nightly(report).schedule, "0 4 * * *");
  assert.deepEqual(JSON.parse(fs.readFileSync(cache, "utf8")), tampered);
  await stopDaemon(d);
});

test("guessStateDir reads a plain top-level state_dir line, else the default, else gives up", () => {
  const f = "/etc/cv/jobs.yaml";
  assert.equal(guessStateDir(f, "jobs: {}\n"), "/etc/cv/.cronvisor");
  assert.equal(guessStateDir(f, "state_dir: /var/lib/cv\n"), "/var/lib/cv");
  assert.equal(guessStateDir(f, "state_dir: st # here\n"), "/etc/cv/st");
  assert.equal(guessStateDir(f, 'state_dir: "/a b/c" # q\n'), "/a b/c");
  assert.equal(guessStateDir(f, "state_dir: 'it''s'\n"), "/etc/cv/it's");
  assert.equal(guessStateDir(f, "state_dir:\n  /x\n"), null);
  assert.equal(guessStateDir(f, "state_dir: &a /x\n"), null);
  assert.equal(guessStateDir(f, "state_dir: /x\nstate_dir: /y\n"), null);
  // Indented: another key's, not the top-level one.
  assert.equal(guessStateDir(f, "jobs:\n  x:\n    state_dir: /x\n"), "/etc/cv/.cronvisor");
});

test("status options read without commander give what commander gives", (t) => {
  const { cfg } = setup(t);
  const ref = status(cfg, "--json");
  assert.equal(ref.code, 0, ref.stderr);
  // Fast path (read in cli.ts) and commander's (a repeated flag, -- before the job) agree.
  for (const args of [
    ["status", "--json", "--config", cfg],
    ["status", `--config=${cfg}`, "--json"],
    ["status", "--json", "--json", "-c", cfg],
  ]) {
    const r = cli(args);
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(steady(r.stdout), steady(ref.stdout), args.join(" "));
  }
  const one = cli(["status", "nightly", "-c", cfg, "--json", "--check"]);
  const oneCommander = cli(["status", "-c", cfg, "--json", "--check", "--", "nightly"]);
  assert.equal(one.code, 2); // no daemon: CRITICAL
  assert.equal(oneCommander.code, one.code);
  assert.equal(steady(oneCommander.stdout), steady(one.stdout));
  assert.deepEqual(
    JSON.parse(one.stdout).jobs.map((j) => j.name),
    ["nightly"],
  );
  for (const args of [
    ["status", "--bogus"],
    ["status", "-c"],
    ["status", "a", "b", "-c", cfg],
  ]) {
    const r = cli(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.match(r.stderr, /^error: /, args.join(" "));
  }
  const help = cli(["status", "--help"]);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /^Usage: cronvisor status \[options\] \[job\]/);
});

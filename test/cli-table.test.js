// Every subcommand with bad input (issue 12, item 5), as one table: missing and extra arguments,
// bad and unknown flags, a config file that is missing, unreadable, a directory or a FIFO, a
// state_dir that is a regular file, a store that is read-only, corrupt or locked by another
// writer, a log file that is gone. Each row asserts the documented exit code, exactly one line on
// stderr naming the thing, no stack trace, and (for a command that only reads) that nothing in the
// state dir changed. Then: text a job or a user wrote is printed with its control characters
// escaped, inside a job `check --help` is help and `check -x` a usage error, and `import-crontab`
// leaves CRONVISOR_* variables out.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { before, test } from "node:test";
import Database from "better-sqlite3";
import { BIN, ROOT, cleanEnv, cli, tmpdir, userCli, waitFor, writeConfig } from "./helpers.js";
import { needs } from "./needs.js";

const IS_ROOT = process.getuid?.() === 0;
const NOBODY = 65534;
const CONFIG = `jobs:\n  a:\n    schedule: "@daily"\n    command: "echo hello"\n  b:\n    schedule: "@daily"\n    command: "true"\n`;

let template; // a config dir whose store holds one run of `a` (with its log) and marker k1 of `a`

before(() => {
  template = tmpdir(null, "cvx-table-");
  const cfg = writeConfig(template, CONFIG);
  const r = cli(["run", "a", "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  const m = cli(["mark", "--job", "a", "-c", cfg, "k1"]);
  assert.equal(m.code, 0, m.stderr);
});

/**
 * `chattr +i` is what keeps root from writing; probed once (not every file system has it). Its
 * rows skip with this reason only when not root or on a file system without it; in CI, as root on
 * ext4, never.
 */
const chattrSkip = (() => {
  if (!IS_ROOT) return "chattr +i needs root";
  const dir = tmpdir(null, "cvx-chattr-");
  const f = path.join(dir, "f");
  fs.writeFileSync(f, "x");
  const r = spawnSync("chattr", ["+i", f], { encoding: "utf8" });
  if (r.status !== 0) return `chattr +i does not work here: ${r.stderr || r.error}`;
  spawnSync("chattr", ["-i", f]);
  fs.rmSync(dir, { recursive: true, force: true });
  return null;
})();

/** A fresh copy of the template for one row: { dir, cfg, state, store, after: [cleanups] }. */
function fresh(t) {
  const dir = tmpdir(t, "cvx-row-");
  fs.cpSync(template, dir, { recursive: true });
  const cfg = path.join(dir, "jobs.yaml");
  const state = path.join(dir, ".cronvisor");
  return { dir, cfg, state, store: path.join(state, "cronvisor.db"), env: {}, cleanups: [] };
}

// What a row's setup does to its copy. Each returns the config path the row passes with -c.
const setups = {
  missingConfig: (c) => path.join(c.dir, "none.yaml"),
  dirConfig: (c) => {
    fs.mkdirSync(path.join(c.dir, "conf.d"));
    return path.join(c.dir, "conf.d");
  },
  fifoConfig: (c) => {
    const f = path.join(c.dir, "fifo.yaml");
    assert.equal(spawnSync("mkfifo", [f]).status, 0, "mkfifo");
    return f;
  },
  // As root chmod does not stop a read: the CLI runs as nobody, who cannot read a 0600 file.
  unreadableConfig: (c) => {
    fs.chmodSync(c.dir, 0o755);
    fs.chmodSync(c.cfg, 0o600);
    if (IS_ROOT) c.uid = NOBODY;
    else fs.chmodSync(c.cfg, 0o000);
    return c.cfg;
  },
  stateFile: (c) => {
    fs.writeFileSync(path.join(c.dir, "state-file"), "not a directory\n");
    return writeConfig(c.dir, `state_dir: ./state-file\n${CONFIG}`, "file-state.yaml");
  },
  // The store file immutable, its dir not: SQLite falls back to a read-only connection.
  readonlyStore: (c) => {
    immutable(c, c.store);
    return c.cfg;
  },
  // The store file and its dir immutable: not even a journal can be made.
  readonlyStateDir: (c) => {
    immutable(c, c.store, c.state);
    return c.cfg;
  },
  corruptStore: (c) => {
    fs.writeFileSync(c.store, crypto.randomBytes(8192));
    return c.cfg;
  },
  // The store names the template's log (an absolute path): point it at this copy's, then remove it.
  logGone: (c) => {
    const db = new Database(c.store);
    db.prepare("UPDATE runs SET log_path = replace(log_path, ?, ?)").run(template, c.dir);
    db.close();
    fs.rmSync(path.join(c.state, "logs"), { recursive: true });
    return c.cfg;
  },
};

/** chattr +i, undone when the row ends (before its temp dir is removed). */
function immutable(c, ...paths) {
  for (const p of paths) assert.equal(spawnSync("chattr", ["+i", p]).status, 0, `chattr +i ${p}`);
  c.cleanups.push(() => {
    for (const p of paths) spawnSync("chattr", ["-i", p]);
  });
}

/**
 * Hold the store's write lock from another process (BEGIN EXCLUSIVE) until the row is done.
 * Resolves once the lock is held.
 */
async function lockStore(t, store) {
  const holder = spawn(
    process.execPath,
    [
      "-e",
      `const D = require(${JSON.stringify(path.join(ROOT, "node_modules", "better-sqlite3"))});
       const db = new D(${JSON.stringify(store)});
       db.exec("BEGIN EXCLUSIVE");
       process.stdout.write("locked\\n");
       process.stdin.on("end", () => { db.exec("ROLLBACK"); db.close(); });
       process.stdin.resume();`,
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  let said = "";
  holder.stdout.on("data", (d) => (said += d));
  const gone = new Promise((r) => holder.on("exit", r));
  t.after(async () => {
    holder.stdin.end();
    await gone;
  });
  await waitFor(() => said.includes("locked"), "the helper to hold the store's lock", 20_000);
}

/** Every file under dir: its size, mtime and hash. config-cache.json is `status`'s own cache. */
function snapshot(dir) {
  const out = {};
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) return out;
  for (const name of fs.readdirSync(dir, { recursive: true }).sort()) {
    if (name === "config-cache.json") continue;
    const p = path.join(dir, name);
    const st = fs.statSync(p);
    out[name] = st.isDirectory()
      ? "dir"
      : `${st.size} ${st.mtimeMs} ${crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex")}`;
  }
  return out;
}

/** The CLI as user `uid` runs it: a copy of the build in a directory every user can traverse. */
function userBin(uid) {
  const copy = userCli({ name: String(uid), uid, gid: uid });
  if (copy.skip) throw new Error(copy.skip);
  return path.join(copy.bin, "cronvisor");
}

/** Run the CLI; never hang (a FIFO must be refused, not read): killed after 30 s. */
function run(args, c) {
  return new Promise((resolve) => {
    // Another user runs a copy of the build where it can reach it: the clone may sit in a
    // directory only root can traverse (a `mktemp -d`, /root).
    const bin = c.uid === undefined ? BIN : userBin(c.uid);
    const child = spawn(process.execPath, [bin, ...args], {
      env: cleanEnv(c.env),
      cwd: c.dir,
      uid: c.uid,
      gid: c.uid,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    // "close", not "exit": the child's output is all read only when its pipes close.
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

// The commands that take -c, each with the arguments that make it valid but for its config.
const WITH_CONFIG = [
  ["daemon"],
  ["validate"],
  ["status"],
  ["history"],
  ["logs", "a"],
  ["next"],
  ["reload"],
  ["run", "a"],
  ["pause", "a"],
  ["resume", "a"],
  ["markers", "a"],
  ["unmark", "a", "k1"],
  ["mark", "--job", "a", "k2"],
  ["check", "--job", "a", "k1"],
  ["once", "--job", "a", "k2", "--", "true"],
];
// The commands that only read: a row of theirs must leave the state dir as it found it.
const READERS = new Set(["validate", "status", "history", "logs", "next", "reload", "markers"]);
const readOnly = (args) =>
  READERS.has(args[0]) || (args[0] === "check" && !args.includes("--stdin"));

const STORE = /\/\.cronvisor\/cronvisor\.db\b/;
const USAGE = (what) => new RegExp(`^error: .*${what}`);

/** Rows: { args (c => argv, or argv; -c is added unless noConfig), setup, exit, stderr }. */
const ROWS = [
  // Missing and extra arguments, bad and unknown flags: commander's one line, exit 2.
  { args: ["run"], exit: 2, stderr: USAGE("missing required argument 'job'") },
  { args: ["run", "a", "b"], exit: 2, stderr: USAGE("too many arguments for 'run'") },
  { args: ["logs"], exit: 2, stderr: USAGE("missing required argument 'job'") },
  // `pause [job]`: a job or --all (docs/chains-and-maintenance.md).
  { args: ["pause"], exit: 2, stderr: /^pause: name a job, or give --all \(every job\)$/ },
  { args: ["resume", "a", "b"], exit: 2, stderr: USAGE("too many arguments for 'resume'") },
  { args: ["markers"], exit: 2, stderr: USAGE("missing required argument 'job'") },
  { args: ["unmark", "a"], exit: 2, stderr: USAGE("missing required argument 'key'") },
  { args: ["unmark", "a", "k1", "k2"], exit: 2, stderr: USAGE("too many arguments for 'unmark'") },
  { args: ["unmark", "a", ""], exit: 2, stderr: /^cronvisor: a marker key must not be empty$/ },
  { args: ["validate", "extra"], exit: 2, stderr: USAGE("too many arguments for 'validate'") },
  { args: ["daemon", "extra"], exit: 2, stderr: USAGE("too many arguments for 'daemon'") },
  { args: ["reload", "extra"], exit: 2, stderr: USAGE("too many arguments for 'reload'") },
  { args: ["status", "a", "b"], exit: 2, stderr: USAGE("too many arguments for 'status'") },
  { args: ["status", "--bogus"], exit: 2, stderr: USAGE("unknown option '--bogus'") },
  { args: ["history", "--limit", "0"], exit: 2, stderr: /--limit must be a positive integer/ },
  { args: ["history", "--limit"], exit: 2, stderr: USAGE("option '--limit <n>' argument missing") },
  {
    args: ["next", "--count", "x"],
    exit: 2,
    stderr: /--count must be a positive integer, got "x"/,
  },
  { args: ["logs", "a", "--run", "-1"], exit: 2, stderr: /--run must be a positive integer/ },
  { args: ["logs", "a", "--run", "99"], exit: 1, stderr: /^no run 99 of a$/ },
  { args: ["logs", "nope"], exit: 2, stderr: /^no job named "nope" in .*jobs\.yaml/ },
  { args: ["markers", "a", "--bogus"], exit: 2, stderr: USAGE("unknown option '--bogus'") },
  { args: ["check", "--job", "a"], exit: 2, stderr: USAGE("missing required argument 'key'") },
  { args: ["check", "--job", "a", "-x"], exit: 2, stderr: /^cronvisor: usage: cronvisor check/ },
  { args: ["mark", "--job", "a", "-x"], exit: 2, stderr: /^cronvisor: usage: cronvisor mark/ },
  {
    args: ["progress", "--job", "a", "-x"],
    exit: 2,
    stderr: /^cronvisor: usage: cronvisor progress/,
  },
  {
    args: ["once", "--job", "a", "-x", "--", "true"],
    exit: 2,
    stderr: /^cronvisor: usage: cronvisor once/,
  },
  { args: ["stauts"], noConfig: true, exit: 2, stderr: /^error: unknown command 'stauts'/ },
  { args: ["--bogus"], noConfig: true, exit: 2, stderr: /^error: unknown option '--bogus'/ },
  {
    args: ["import-crontab", "--bogus"],
    noConfig: true,
    exit: 2,
    stderr: USAGE("unknown option '--bogus'"),
  },
  {
    args: ["import-crontab", "/nonexistent"],
    noConfig: true,
    exit: 2,
    stderr: /^cronvisor: cannot read \/nonexistent: no such file$/,
  },
  {
    args: ["import-crontab", "/tmp"],
    noConfig: true,
    exit: 2,
    stderr: /^cronvisor: cannot read \/tmp: is a directory$/,
  },
  // A log file that is gone.
  {
    args: ["logs", "a"],
    setup: "logGone",
    exit: 1,
    stderr: /^cronvisor: the log file .*\/logs\/a\/\S+ of run 1 of a is gone/,
  },
  // The config file: missing, unreadable, a directory, a FIFO. Every command, exit 2 (`status
  // --check` is UNKNOWN, 3).
  // A missing config for every command; the other three for each way a config is read (the
  // commands' load(), status's cached read, the daemon's, reload's, validate's, a marker
  // command's --job): the rest share load(), and a row costs a Node start-up.
  ...["missingConfig", "unreadableConfig", "dirConfig", "fifoConfig"].flatMap((setup) =>
    [...WITH_CONFIG, ["status", "--check"]]
      .filter(
        (args) =>
          setup === "missingConfig" ||
          ["status", "daemon", "reload", "validate", "run", "check"].includes(args[0] ?? ""),
      )
      .map((args) => ({
        args,
        setup,
        exit: args.includes("--check") ? 3 : 2,
        stderr: {
          missingConfig: /none\.yaml:1:1: \(file\): cannot read: no such file/,
          unreadableConfig: /jobs\.yaml:1:1: \(file\): cannot read: permission denied/,
          dirConfig: /conf\.d:1:1: \(file\): cannot read: is a directory/,
          fifoConfig: /fifo\.yaml:1:1: \(file\): cannot read: not a regular file/,
        }[setup],
      })),
  ),
  // state_dir a regular file: the commands that need the store say so, exit 1 (`check`: 69, it
  // cannot tell; `status --check`: CRITICAL, 2).
  ...[...WITH_CONFIG, ["status", "--check"]]
    .filter(([cmd]) => !["validate", "next"].includes(cmd))
    .map((args) => ({
      args,
      setup: "stateFile",
      exit: args[0] === "check" ? 69 : args.includes("--check") ? 2 : 1,
      // `status --check` says it on stdout, in its verdict line.
      stderr: args.includes("--check") ? /^$/ : /state-file is not a directory/,
      stdout: args.includes("--check") ? /^CRITICAL: .*state-file is not a directory/ : undefined,
      lines: args.includes("--check") ? 0 : 1,
    })),
  // A corrupt store (random bytes): every command that opens it refuses, exit 1 (`check` 69,
  // `status --check` CRITICAL).
  ...[...WITH_CONFIG, ["status", "--check"]]
    .filter(([cmd]) => !["validate", "next"].includes(cmd))
    .map((args) => ({
      args,
      setup: "corruptStore",
      exit: args[0] === "check" ? 69 : args.includes("--check") ? 2 : 1,
      stderr: args.includes("--check") ? /^$/ : STORE,
      stdout: args.includes("--check") ? /^CRITICAL: .*cronvisor\.db/ : undefined,
      lines: args.includes("--check") ? 0 : 1,
    })),
  // A read-only store: every command that writes refuses with one line naming it, exit 1.
  ...["readonlyStore", "readonlyStateDir"].flatMap((setup) =>
    [
      ["daemon"],
      ["run", "a"],
      ["pause", "a"],
      ["resume", "a"],
      ["unmark", "a", "k1"],
      ["mark", "--job", "a", "k2"],
      ["once", "--job", "a", "k2", "--", "true"],
    ].map((args) => ({ args, setup, exit: 1, stderr: STORE, skip: chattrSkip })),
  ),
  // A store another writer holds past the busy timeout: 75, try again later.
  ...[
    ["pause", "a"],
    ["unmark", "a", "k1"],
    ["mark", "--job", "a", "k2"],
    ["run", "a"],
  ].map((args) => ({
    args,
    setup: "locked",
    exit: 75,
    stderr: STORE,
  })),
];

test(
  "every subcommand with bad input: its exit code, one line naming the thing, no stack, nothing written by a reader",
  { concurrency: 4 },
  async (t) => {
    const failures = [];
    const one = async (row) => {
      // A row whose setup this machine cannot make (chattr +i without root) is reported as
      // skipped with its reason, never dropped silently.
      await t.test(`${row.setup ?? "-"}: ${row.args.join(" ")}`, needs(row.skip), async (tt) => {
        const c = fresh(tt);
        let cfg = c.cfg;
        if (row.setup === "locked") await lockStore(tt, c.store);
        else if (row.setup) cfg = setups[row.setup](c, tt);
        // -c right after the command: before once's `--` and after no option that takes a value.
        const [cmd, ...rest] = row.args;
        const argv = row.noConfig ? row.args : [cmd, "-c", cfg, ...rest];
        const before = snapshot(c.state);
        const r = await run(argv, c);
        const what = `${row.setup ?? "-"}: cronvisor ${argv.join(" ")}\n--- stderr:\n${r.stderr}--- stdout:\n${r.stdout}`;
        try {
          assert.equal(r.signal, null, `${what}\nit hung and was killed`);
          assert.equal(r.code, row.exit, `${what}\nexit code`);
          const lines = r.stderr.split("\n").filter((l) => l !== "");
          assert.equal(lines.length, row.lines ?? 1, `${what}\none line on stderr`);
          assert.match(r.stderr.trimEnd(), row.stderr, what);
          if (row.stdout) assert.match(r.stdout, row.stdout, what);
          // eslint-disable-next-line no-control-regex -- a raw ESC is what must not be printed
          assert.doesNotMatch(r.stderr + r.stdout, /\n\s+at |Error: |\x1b/, `${what}\nno stack`);
          if (readOnly(row.args))
            assert.deepEqual(snapshot(c.state), before, `${what}\na reader changed the state dir`);
        } catch (e) {
          failures.push(e.message);
          throw e;
        } finally {
          for (const f of c.cleanups) f();
        }
      });
    };
    // Four at a time: the locked rows wait out the 5 s busy timeout while the others go on.
    const queue = [...ROWS];
    await Promise.all(
      [0, 1, 2, 3].map(async () => {
        while (queue.length > 0) await one(queue.shift());
      }),
    );
    assert.deepEqual(failures, [], `${failures.length} rows failed`);
  },
);

test("inside a job: -h/--help prints the usage (exit 0), another dash-led option is a usage error, -- ends options; nothing written", async (t) => {
  const c = fresh(t);
  const env = {
    CRONVISOR_STATE_DIR: c.state,
    CRONVISOR_JOB: "a",
    CRONVISOR_RUN_ID: "1",
    CRONVISOR_FENCE: "1",
  };
  const before = snapshot(c.state);
  const cases = [
    [["check", "--help"], 0, /^usage: cronvisor check KEY\n$/, ""],
    [["check", "-h"], 0, /^usage: cronvisor check KEY\n$/, ""],
    [["mark", "--help"], 0, /^usage: cronvisor mark KEY/, ""],
    [["once", "--help"], 0, /^usage: cronvisor once/, ""],
    [["progress", "--help"], 0, /^usage: cronvisor progress/, ""],
    [["check", "-x"], 2, /^$/, "cronvisor: usage: cronvisor check KEY\n"],
    [["check", "--bogus"], 2, /^$/, "cronvisor: usage: cronvisor check KEY\n"],
    [
      ["mark", "k", "--bogus"],
      2,
      /^$/,
      "cronvisor: usage: cronvisor mark KEY... | cronvisor mark --stdin\n",
    ],
    [["progress", "-v"], 2, /^$/, "cronvisor: usage: cronvisor progress [MESSAGE]\n"],
    // After `--`, a dash-led argument is a key: `--help` is not marked.
    [["check", "--", "--help"], 1, /^$/, ""],
  ];
  for (const [args, code, stdout, stderr] of cases) {
    const r = await run(args, { ...c, env });
    const what = `cronvisor ${args.join(" ")} inside a job: ${JSON.stringify(r)}`;
    assert.equal(r.code, code, what);
    assert.match(r.stdout, stdout, what);
    assert.equal(r.stderr, stderr, what);
  }
  assert.deepEqual(snapshot(c.state), before, "help and usage errors write nothing");
});

test("keys, progress messages and reasons are printed with their control characters escaped", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    [
      "jobs:",
      "  p:",
      '    schedule: "@daily"',
      "    command: |",
      `      ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} progress "$(printf 'row 5 \\033]0;pwned\\007\\033[2J')"`,
      "      sleep 60",
      "",
    ].join("\n"),
  );
  const key = "k\x1b[2J\x1b]0;title\x07\u202e";
  assert.equal(cli(["mark", "--job", "p", "-c", cfg, key]).code, 0);
  const shown = "k\\x1b[2J\\x1b]0;title\\x07\\u202e";
  const m = cli(["markers", "p", "-c", cfg]);
  assert.equal(m.code, 0, m.stderr);
  assert.ok(m.stdout.includes(shown), m.stdout);
  assert.doesNotMatch(m.stdout, /[\x00-\x09\x0b-\x1f\x7f\u202e]/); // eslint-disable-line no-control-regex
  assert.ok(JSON.parse(cli(["markers", "p", "--json", "-c", cfg]).stdout)[0].key === key);

  const job = spawn(process.execPath, [BIN, "run", "p", "-c", cfg], {
    env: cleanEnv(),
    stdio: "ignore",
  });
  const ended = new Promise((r) => job.on("close", r));
  t.after(async () => {
    job.kill("SIGTERM");
    await ended;
  });
  const s = await waitFor(() => {
    const r = cli(["status", "p", "-c", cfg]);
    return r.stdout.includes("row 5") ? r : null;
  }, "status p to show the progress message");
  assert.ok(s.stdout.includes("row 5 \\x1b]0;pwned\\x07\\x1b[2J"), s.stdout);
  assert.doesNotMatch(s.stdout, /[\x00-\x09\x0b-\x1f\x7f]/); // eslint-disable-line no-control-regex
  job.kill("SIGTERM");
  await ended;

  const u = cli(["unmark", "p", key, "-c", cfg]);
  assert.equal(u.code, 0, u.stderr);
  assert.equal(u.stdout, `unmarked ${shown} in p\n`);
});

test("import-crontab leaves CRONVISOR_* variables out of env:, with a comment saying why; the output validates", (t) => {
  const dir = tmpdir(t);
  const crontab =
    "CRONVISOR_JOB=nightly\nMODE=fast\n0 2 * * * echo $MODE\nCRONVISOR_FENCE=7\n5 2 * * * echo two\n";
  const r = cli(["import-crontab", "-"], { input: crontab });
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stdout, /^\s*CRONVISOR_\w+:/m, r.stdout);
  assert.match(
    r.stdout,
    /^\s*#.*CRONVISOR_JOB=nightly.*not imported.*cronvisor sets CRONVISOR_\*/m,
  );
  assert.match(r.stdout, /^\s*#.*CRONVISOR_FENCE=7.*not imported/m);
  assert.match(r.stdout, /MODE: fast/);
  const cfg = writeConfig(dir, r.stdout);
  const v = cli(["validate", "-c", cfg]);
  assert.equal(v.code, 0, `${v.stderr}\n${r.stdout}`);
});

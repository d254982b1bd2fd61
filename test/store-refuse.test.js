// A store file that exists but is not a usable cronvisor store (0 bytes, random bytes, another
// program's SQLite file, an older schema for a reader) is refused by every command that opens
// it, with one line naming the file and what to do, and is left byte-identical; only a missing
// store is created, atomically. Read-only commands never write into the state dir (issue 12,
// item 3).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { Markers } from "../dist/markers/markers.js";
import {
  BIN,
  cleanEnv,
  cli,
  query,
  spawnCli,
  tmpdir,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";

const CONFIG = `jobs:\n  a:\n    schedule: "@daily"\n    command: "true"\n`;
const MIGRATIONS = path.join(import.meta.dirname, "..", "dist", "store", "migrations", "sqlite");

/** A config dir with a state dir holding `bytes` as its store. */
function setup(t, bytes) {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, CONFIG);
  const state = path.join(dir, ".cronvisor");
  fs.mkdirSync(state, { mode: 0o700 });
  const file = path.join(state, "cronvisor.db");
  fs.writeFileSync(file, bytes, { mode: 0o600 });
  return { dir, cfg, state, file };
}

/** Another program's SQLite file (rollback journal, a table of its own, its own user_version). */
function foreignSqlite(t) {
  const file = path.join(tmpdir(t), "other.db");
  const db = new Database(file);
  db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)");
  db.prepare("INSERT INTO notes (body) VALUES (?)").run("keep me");
  db.pragma("user_version = 2");
  db.close();
  return fs.readFileSync(file);
}

const KINDS = {
  empty: () => Buffer.alloc(0),
  random: () => {
    const b = crypto.randomBytes(8192);
    b.write("not sqlite", 0); // never, by chance, the SQLite magic
    return b;
  },
  foreign: foreignSqlite,
};

/** Every command that opens the store, and the exit code it owes an unusable one. */
function commands(cfg, state) {
  const inRun = {
    CRONVISOR_STATE_DIR: state,
    CRONVISOR_JOB: "a",
    CRONVISOR_RUN_ID: "1",
    CRONVISOR_FENCE: "1",
  };
  const c = ["-c", cfg];
  return [
    ["daemon", ["daemon", ...c], 1],
    ["run", ["run", "a", ...c], 1],
    ["status", ["status", ...c], 1],
    ["status JOB --json", ["status", "a", "--json", ...c], 1],
    ["history", ["history", ...c], 1],
    ["logs", ["logs", "a", ...c], 1],
    ["markers", ["markers", "a", ...c], 1],
    ["unmark", ["unmark", "a", "k", ...c], 1],
    ["pause", ["pause", "a", ...c], 1],
    ["resume", ["resume", "a", ...c], 1],
    ["reload", ["reload", ...c], 1],
    ["mark --job", ["mark", "--job", "a", "k", ...c], 1],
    ["check --job", ["check", "--job", "a", "k", ...c], 69],
    ["once --job", ["once", "--job", "a", "k", ...c, "--", "true"], 1],
    ["mark in a job", ["mark", "k"], 1, inRun],
    ["check in a job", ["check", "k"], 69, inRun],
    ["once in a job", ["once", "k", "--", "true"], 1, inRun],
    ["progress in a job", ["progress", "half way"], 1, inRun],
  ];
}

/** What a state dir holds: name, type, size, mtime and a hash of each entry, and the dir itself. */
function snapshot(dir) {
  const out = {};
  const walk = (d, rel) => {
    const st = fs.statSync(d);
    out[rel || "."] = `dir ${st.mtimeMs}`;
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const s = fs.lstatSync(p);
      if (s.isDirectory()) walk(p, path.join(rel, name));
      else {
        const hash = crypto.createHash("sha256").update(fs.readFileSync(p)).digest("hex");
        out[path.join(rel, name)] = `${s.size} ${s.mtimeMs} ${s.mode.toString(8)} ${hash}`;
      }
    }
  };
  walk(dir, "");
  return out;
}

function assertOneLine(r, file, what) {
  const text = r.stderr.trimEnd();
  assert.ok(text.length > 0, `${what}: something on stderr`);
  assert.doesNotMatch(text, /\n/, `${what}: one line on stderr, got:\n${r.stderr}`);
  assert.ok(text.includes(file), `${what}: names ${file}: ${text}`);
  assert.match(text, /restore it from a backup|move it away/, `${what}: says what to do: ${text}`);
  assert.doesNotMatch(r.stdout + r.stderr, /\n\s+at /, `${what}: no stack trace`);
}

for (const [kind, make] of Object.entries(KINDS)) {
  test(`a ${kind} store file is refused by every command and left byte-identical`, (t) => {
    const { cfg, state, file } = setup(t, make(t));
    const before = fs.readFileSync(file);
    const names = fs.readdirSync(state).sort();
    for (const [what, args, code, env] of commands(cfg, state)) {
      const r = cli(args, { env, timeout: 20_000 });
      assert.equal(r.code, code, `${what}: exit ${r.code} (${r.signal}):\n${r.stdout}${r.stderr}`);
      assertOneLine(r, file, what);
      assert.deepEqual(fs.readFileSync(file), before, `${what}: the store's bytes are unchanged`);
      // config-cache.json is status's copy of the parsed config, not the store.
      const now = fs.readdirSync(state).filter((n) => n !== "config-cache.json");
      assert.deepEqual(now.sort(), names, `${what}: no file made next to the store`);
    }
    const check = cli(["status", "--check", "-c", cfg]);
    assert.equal(check.code, 2, check.stdout + check.stderr);
    assert.match(check.stdout.split("\n")[0], /^CRITICAL: state store .*cronvisor\.db /);
    assert.ok(check.stdout.split("\n")[0].includes(file), check.stdout);
    assert.doesNotMatch(check.stdout + check.stderr, /\n\s+at /);
    assert.throws(
      () => Markers.open({ stateDir: state, job: "a", run: null }),
      (e) => e.message.includes(file) && /restore it from a backup|move it away/.test(e.message),
      "the library refuses it too",
    );
    assert.deepEqual(fs.readFileSync(file), before, "the store's bytes are unchanged at the end");
  });
}

test("the refusals say what is wrong: empty, not SQLite, not cronvisor's", (t) => {
  const messages = {};
  for (const [kind, make] of Object.entries(KINDS)) {
    const { cfg, file } = setup(t, make(t));
    messages[kind] = cli(["history", "-c", cfg]).stderr.replace(file, "FILE");
  }
  assert.match(messages.empty, /^cronvisor: state store FILE is empty \(0 bytes\)/);
  assert.match(messages.random, /^cronvisor: state store FILE is not a valid database/);
  assert.match(messages.foreign, /^cronvisor: state store FILE is not a cronvisor store/);
});

/** A real store, written by the daemon, a mark and a run, then the daemon stopped cleanly. */
async function realStore(t) {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, `heartbeat: 1s\n${CONFIG}`);
  const state = path.join(dir, ".cronvisor");
  const d = spawnCli(["daemon", "-c", cfg]);
  t.after(() => d.kill("SIGKILL"));
  await waitFor(() => readStore(state).daemon()?.pid === d.pid);
  assert.equal(cli(["mark", "--job", "a", "done-1", "-c", cfg]).code, 0);
  assert.equal(cli(["run", "a", "-c", cfg]).code, 0);
  d.kill("SIGTERM");
  assert.equal((await d.exited).code, 0, d.err);
  return { dir, cfg, state, file: path.join(state, "cronvisor.db") };
}

test("read-only commands change nothing in the state dir (daemon stopped, no WAL file)", async (t) => {
  const { cfg, state } = await realStore(t);
  // At rest: the daemon's close checkpointed and removed the WAL (its config cache is fresh, so
  // `status` has nothing to write either).
  assert.deepEqual(
    fs.readdirSync(state).filter((n) => n.startsWith("cronvisor.db")),
    ["cronvisor.db"],
  );
  const before = snapshot(state);
  const c = ["-c", cfg];
  const reads = [
    [["status", ...c], 0],
    [["status", "--json", ...c], 0],
    [["status", "--check", ...c], 2], // the daemon is down: CRITICAL
    [["status", "a", ...c], 0],
    [["history", ...c], 0],
    [["history", "a", "--json", ...c], 0],
    [["next", ...c], 0],
    [["logs", "a", ...c], 0],
    [["markers", "a", ...c], 0],
    [["markers", "a", "--json", ...c], 0],
    [["check", "--job", "a", "done-1", ...c], 0],
    [["check", "--job", "a", "not-done", ...c], 1],
    [["validate", ...c], 0],
    [["reload", ...c], 1], // no daemon
  ];
  for (const [args, code] of reads) {
    const r = cli(args);
    assert.equal(r.code, code, `${args.join(" ")}: ${r.stdout}${r.stderr}`);
    assert.deepEqual(snapshot(state), before, `${args.join(" ")} changed the state dir`);
  }
  const markers = JSON.parse(cli(["markers", "a", "--json", ...c]).stdout);
  assert.deepEqual(
    markers.map((m) => m.key),
    ["done-1"],
    "the snapshot read sees the store's content",
  );
});

test("a store at an older schema: readers refuse and name the cure; a writer brings it forward", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, CONFIG);
  const state = path.join(dir, ".cronvisor");
  fs.mkdirSync(state, { mode: 0o700 });
  const file = path.join(state, "cronvisor.db");
  // What an older cronvisor left: every migration but the newest, in WAL mode, closed cleanly.
  const files = fs
    .readdirSync(MIGRATIONS)
    .filter((f) => f.endsWith(".sql"))
    .sort();
  const db = new Database(file);
  db.pragma("journal_mode = WAL");
  for (const f of files.slice(0, -1)) db.exec(fs.readFileSync(path.join(MIGRATIONS, f), "utf8"));
  db.pragma(`user_version = ${files.length - 1}`);
  db.close();
  // The store's files (status also writes its config cache here, which is not the store).
  const storeFiles = () =>
    Object.entries(snapshot(state)).filter(([name]) => name.startsWith("cronvisor.db"));
  const before = storeFiles();
  const r = cli(["status", "-c", cfg]);
  assert.equal(r.code, 1, r.stderr);
  assert.match(
    r.stderr,
    new RegExp(
      `^cronvisor: state store ${file} is at schema version ${files.length - 1}, older than this cronvisor's ${files.length}: .*(daemon|cronvisor run)`,
    ),
  );
  assert.doesNotMatch(r.stderr.trimEnd(), /\n/);
  const check = cli(["status", "--check", "-c", cfg]);
  assert.equal(check.code, 3, check.stdout);
  assert.match(check.stdout, /^UNKNOWN: state store .* older than this cronvisor's/);
  assert.equal(cli(["check", "--job", "a", "k", "-c", cfg]).code, 69);
  assert.deepEqual(storeFiles(), before, "the readers wrote nothing");
  assert.equal(cli(["pause", "a", "-c", cfg]).code, 0, "a writer migrates");
  assert.equal(query(state, "PRAGMA user_version")[0].user_version, files.length);
  assert.equal(cli(["status", "-c", cfg]).code, 0);
});

test("a missing store with its WAL left beside it is not created over that WAL", (t) => {
  const { cfg, state, file } = setup(t, Buffer.alloc(0));
  fs.renameSync(file, `${file}-wal`);
  fs.writeFileSync(`${file}-wal`, crypto.randomBytes(4096));
  const before = snapshot(state);
  const r = cli(["pause", "a", "-c", cfg]);
  assert.equal(r.code, 1, r.stderr);
  assert.equal(
    r.stderr,
    `cronvisor: state store ${file} is missing but its write-ahead log ${file}-wal is there; it was left untouched: restore the store from a backup, or move the -wal file away to start afresh\n`,
  );
  assert.deepEqual(snapshot(state), before);
});

test("a missing store is created whole: concurrent first writers agree, nothing is left over", async (t) => {
  const dir = tmpdir(t);
  const cfg = writeConfig(dir, CONFIG);
  const state = path.join(dir, ".cronvisor");
  const keys = ["k0", "k1", "k2", "k3", "k4", "k5"];
  const codes = await Promise.all(
    keys.map(
      (k) =>
        new Promise((resolve) => {
          const p = spawn(process.execPath, [BIN, "mark", "--job", "a", k, "-c", cfg], {
            env: cleanEnv(),
            stdio: ["ignore", "ignore", "pipe"],
          });
          let err = "";
          p.stderr.on("data", (d) => (err += d));
          // 'close', not 'exit': stderr written just before the exit must be in `err` too.
          p.on("close", (code) => resolve(`${k}=${code}${err ? ` ${err}` : ""}`));
        }),
    ),
  );
  assert.deepEqual(
    codes,
    keys.map((k) => `${k}=0`),
  );
  const markers = JSON.parse(cli(["markers", "a", "--json", "-c", cfg]).stdout);
  assert.deepEqual(markers.map((m) => m.key).sort(), keys, "no marker written into a lost store");
  assert.deepEqual(fs.readdirSync(state), ["cronvisor.db"], "no temporary store left behind");
  assert.equal(fs.statSync(path.join(state, "cronvisor.db")).mode & 0o777, 0o600);
});

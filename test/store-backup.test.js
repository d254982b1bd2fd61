// `cronvisor backup` and `cronvisor restore` through the built CLI, on real stores: a backup of a
// store of 100,000 markers while the daemon fires and marks every second, the refusals (DEST
// there, a full disk, a PostgreSQL store) that leave DEST as it was, and a restore that a live
// daemon, a bad SRC or a newer schema stops before anything changes.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { migrationFiles } from "../dist/store/migrate.js";
import {
  BIN,
  cli,
  mountTmpfs,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needsNow } from "./needs.js";

const mark = `'"${process.execPath}" "${BIN}" mark "k-$CRONVISOR_SLOT"'`;

function setup(t, extra = "") {
  const dir = tmpdir(t);
  const cfg = writeConfig(
    dir,
    `state_dir: ./state
heartbeat: 1s
jobs:
  tick: { schedule: "* * * * * *", command: ${mark}, overlap: skip }
  bulk: { schedule: "0 3 * * *", command: "true" }
${extra}`,
  );
  return {
    dir,
    cfg,
    stateDir: path.join(dir, "state"),
    file: path.join(dir, "state", "cronvisor.db"),
  };
}

/** `n` markers in bulk's namespace, through the real `mark --stdin`. */
function markBulk(cfg, n, prefix = "bulk-") {
  const keys = Array.from({ length: n }, (_, i) => `${prefix}${i}`).join("\n");
  const r = spawnSync(process.execPath, [BIN, "mark", "--stdin", "--job", "bulk", "-c", cfg], {
    input: `${keys}\n`,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  assert.equal(r.status, 0, r.stderr);
}

function readDb(file, sql) {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return db.prepare(sql).all();
  } finally {
    db.close();
  }
}

test("backup while the daemon marks every second: consistent copies of 100,000 markers, no slot lost", async (t) => {
  const { dir, cfg, file } = setup(t);
  markBulk(cfg, 100_000);
  const d = startDaemon(t, cfg);
  await waitFor(
    () => readDb(file, "SELECT 1 FROM runs WHERE job = 'tick' AND status = 'ok'").length > 0,
    "a tick",
  );
  const from = Math.ceil(Date.now() / 1000) * 1000;
  const copies = [];
  for (let i = 0; Date.now() < from + 3000 || i < 3; i++) {
    const dest = path.join(dir, `b${i}.db`);
    const r = cli(["backup", dest, "-c", cfg]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(
        `^backed up \\d+ runs and (\\d+) markers \\(\\d+ bytes, schema version ${migrationFiles().length}\\) to ${dest}\\n$`,
      ),
    );
    assert.ok(Number(/and (\d+) markers/.exec(r.stdout)[1]) >= 100_000);
    copies.push(dest);
  }
  const to = Math.floor(Date.now() / 1000) * 1000 - 1000;
  // Every slot of the window ran and marked: the backups held no writer back.
  await waitFor(
    () =>
      readDb(
        file,
        `SELECT count(*) AS n FROM runs WHERE job = 'tick' AND slot BETWEEN ${from} AND ${to} AND status = 'ok'`,
      )[0].n ===
      (to - from) / 1000 + 1,
    "every slot of the window ok",
    10_000,
  );
  const dispositions = readDb(
    file,
    `SELECT slot, status, reason FROM runs WHERE job = 'tick' AND slot BETWEEN ${from} AND ${to} AND status != 'ok'`,
  );
  assert.deepEqual(dispositions, []);
  for (const slot of [from, to]) {
    assert.equal(
      readDb(
        file,
        `SELECT count(*) AS n FROM markers WHERE job = 'tick' AND key = 'k-${new Date(slot).toISOString()}'`,
      )[0].n,
      1,
    );
  }
  await stopDaemon(d);
  for (const c of copies) {
    assert.equal(fs.statSync(c).mode & 0o777, 0o600);
    assert.deepEqual(readDb(c, "PRAGMA integrity_check"), [{ integrity_check: "ok" }]);
    // One moment of the store: each job's counted markers are the markers it holds.
    assert.deepEqual(
      readDb(
        c,
        "SELECT name FROM jobs WHERE marker_count != (SELECT count(*) FROM markers m WHERE m.job = jobs.name)",
      ),
      [],
    );
  }
  assert.deepEqual(
    fs.readdirSync(dir).filter((f) => f.includes("partial")),
    [],
  );
});

test("backup never writes over DEST: an existing file or link stays as it was (exit 2)", (t) => {
  const { dir, cfg } = setup(t);
  markBulk(cfg, 3);
  const dest = path.join(dir, "keep.db");
  fs.writeFileSync(dest, "precious");
  const r = cli(["backup", dest, "-c", cfg]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /keep\.db already exists; it was left untouched/);
  assert.equal(fs.readFileSync(dest, "utf8"), "precious");
  const link = path.join(dir, "link.db");
  fs.symlinkSync(path.join(dir, "nowhere.db"), link);
  assert.equal(cli(["backup", link, "-c", cfg]).code, 2);
  assert.equal(fs.existsSync(path.join(dir, "nowhere.db")), false);
  assert.deepEqual(
    fs.readdirSync(dir).filter((f) => f.includes("partial")),
    [],
  );
});

test("a backup that fails (a full disk) leaves nothing at DEST (exit 1)", (t) => {
  const disk = mountTmpfs(t, () => {}, "1m");
  if (needsNow(t, disk.skip)) return;
  const { cfg } = setup(t);
  markBulk(cfg, 40_000); // a store of over 1 MB
  const dest = path.join(disk.mnt, "b.db");
  const r = cli(["backup", dest, "-c", cfg]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stderr, /^cronvisor: backup to .*b\.db failed: .*full/m);
  assert.deepEqual(fs.readdirSync(disk.mnt), []);
});

test("backup and restore of a PostgreSQL store: exit 2, nothing written, pg_dump/pg_restore said", (t) => {
  const { dir, cfg } = setup(t, "store: postgresql://cron@db.example:5432/cronvisor\n");
  const dest = path.join(dir, "b.db");
  const r = cli(["backup", dest, "-c", cfg]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(
    r.stderr,
    /pg_dump --format=custom --file=DEST 'postgresql:\/\/cron@db\.example:5432\/cronvisor'/,
  );
  assert.equal(fs.existsSync(dest), false);
  fs.writeFileSync(dest, "x");
  const back = cli(["restore", dest, "-c", cfg]);
  assert.equal(back.code, 2);
  assert.match(back.stderr, /pg_restore --clean --if-exists --single-transaction/);
});

test("restore: refused while a daemon holds the state dir; then the next start reads the restored markers", async (t) => {
  const { dir, cfg, stateDir, file } = setup(t);
  markBulk(cfg, 5, "before-");
  const backup = path.join(dir, "b.db");
  assert.equal(cli(["backup", backup, "-c", cfg]).code, 0);
  markBulk(cfg, 2, "after-");
  const d = startDaemon(t, cfg);
  await waitFor(
    () =>
      readDb(file, "SELECT pid FROM daemon WHERE pid IS NOT NULL AND stopped_at IS NULL").length >
      0,
    "the daemon's row",
  );
  const busy = cli(["restore", backup, "-c", cfg]);
  assert.equal(busy.code, 1);
  assert.match(busy.stderr, new RegExp(`a daemon \\(pid ${d.pid}\\) holds the state dir`));
  assert.equal(
    cli(["check", "after-0", "--job", "bulk", "-c", cfg]).code,
    0,
    "the store was left as it was",
  );
  await stopDaemon(d);

  const r = cli(["restore", backup, "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^restored \d+ runs and 5 markers from .*b\.db into /);
  const kept = /kept as (\S+)\n/.exec(r.stdout)[1];
  assert.match(path.basename(kept), /^cronvisor\.db\.before-restore-\d{8}T\d{6}Z$/);
  assert.equal(path.dirname(kept), stateDir);
  assert.equal(readDb(kept, "SELECT count(*) AS n FROM markers WHERE key LIKE 'after-%'")[0].n, 2);
  assert.equal(fs.statSync(file).mode & 0o777, 0o600);
  assert.equal(fs.existsSync(`${file}-wal`), false);
  assert.equal(cli(["check", "before-4", "--job", "bulk", "-c", cfg]).code, 0);
  assert.equal(cli(["check", "after-0", "--job", "bulk", "-c", cfg]).code, 1);
  const d2 = startDaemon(t, cfg);
  await waitFor(() => {
    const r = cli(["status", "--json", "-c", cfg]);
    const s = JSON.parse(r.stdout);
    return s.daemon.state === "running" && s.jobs.find((j) => j.name === "bulk").markers === 5;
  }, "the restarted daemon on the restored store");
  await stopDaemon(d2);
});

test("restore checks SRC: not SQLite, not cronvisor's, corrupt, newer refused untouched; older migrated", (t) => {
  const { dir, cfg, stateDir, file } = setup(t);
  markBulk(cfg, 3);
  const before = fs.readFileSync(file);
  const refused = (src, why) => {
    const r = cli(["restore", src, "-c", cfg]);
    assert.equal(r.code, 1, `${src}: ${r.stdout}${r.stderr}`);
    assert.match(r.stderr, why);
    assert.deepEqual(fs.readFileSync(file), before, "the current store is as it was");
    assert.deepEqual(
      fs.readdirSync(stateDir).filter((f) => /before-restore|partial/.test(f)),
      [],
    );
  };
  const text = path.join(dir, "notes.txt");
  fs.writeFileSync(text, "not a database at all, but long enough to look like one ".repeat(20));
  refused(text, /notes\.txt cannot be read as a store: file is not a database/);

  const other = path.join(dir, "other.db");
  const o = new Database(other);
  o.exec("CREATE TABLE t (x)");
  o.close();
  refused(other, /other\.db is not a cronvisor store/);

  const newer = path.join(dir, "newer.db");
  assert.equal(cli(["backup", newer, "-c", cfg]).code, 0);
  const n = new Database(newer);
  n.pragma("user_version = 99");
  n.close();
  refused(newer, /newer\.db is at schema version 99, newer than this cronvisor knows/);

  const corrupt = path.join(dir, "corrupt.db");
  assert.equal(cli(["backup", corrupt, "-c", cfg]).code, 0);
  const bytes = fs.readFileSync(corrupt);
  const page = 4096;
  for (let p = page; p + page <= bytes.length; p += page) bytes.fill(0x5a, p + 8, p + 200);
  fs.writeFileSync(corrupt, bytes);
  refused(corrupt, /corrupt\.db (failed its integrity check|cannot be read as a store)/);

  // An older store (version 9, as the cronvisor before migration 010 wrote it) is brought forward.
  const old = path.join(dir, "old.db");
  const db = new Database(old);
  for (const f of migrationFiles().slice(0, 9))
    db.exec(
      fs.readFileSync(new URL(`../dist/store/migrations/sqlite/${f}`, import.meta.url), "utf8"),
    );
  db.pragma("user_version = 9");
  db.prepare("INSERT INTO markers (job, key, created_at) VALUES ('bulk', 'old-key', 1)").run();
  db.close();
  const r = cli(["restore", old, "-c", cfg]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`brought from schema version 9 to ${migrationFiles().length}`));
  assert.equal(readDb(file, "PRAGMA user_version")[0].user_version, migrationFiles().length);
  assert.equal(cli(["check", "old-key", "--job", "bulk", "-c", cfg]).code, 0);
  assert.equal(cli(["check", "bulk-0", "--job", "bulk", "-c", cfg]).code, 1);
});

test("restore on a new host: the state dir is made 0700, and the backup's markers are there", (t) => {
  const { dir, cfg } = setup(t);
  markBulk(cfg, 4);
  const backup = path.join(dir, "b.db");
  assert.equal(cli(["backup", backup, "-c", cfg]).code, 0);
  const fresh = tmpdir(t);
  const cfg2 = writeConfig(
    fresh,
    `state_dir: ./new/state\njobs:\n  bulk: { schedule: "0 3 * * *", command: "true" }\n`,
  );
  const r = cli(["restore", backup, "-c", cfg2]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /there was no store before it/);
  assert.equal(fs.statSync(path.join(fresh, "new", "state")).mode & 0o777, 0o700);
  assert.equal(cli(["check", "bulk-3", "--job", "bulk", "-c", cfg2]).code, 0);
  const missing = cli(["backup", path.join(fresh, "no", "such", "dir", "b.db"), "-c", cfg2]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /the directory .*no\/such\/dir does not exist/);
});

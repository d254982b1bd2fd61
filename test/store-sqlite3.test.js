// The store as an operator holds it with the distribution's own tools: the system's `sqlite3`
// (Debian 12's 3.40; CI installs it) opens a store that went through every migration and real
// runs, checks it, backs it up and answers the query docs/store.md documents. And the schema
// stored in the file (what SQLite parses at every open) uses nothing newer than SQLite 3.31.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { migrationFiles, migrationText } from "../dist/store/migrate.js";
import { BIN, cli, tmpdir, writeConfig } from "./helpers.js";
import { needs } from "./needs.js";

const SQLITE3 = "/usr/bin/sqlite3";
const skip = fs.existsSync(SQLITE3)
  ? false
  : `${SQLITE3} is not installed (apt-get install sqlite3)`;

/** The system's sqlite3 on `file`, reading SQL from stdin. */
function sqlite3(file, sql, ...flags) {
  const r = spawnSync(SQLITE3, [...flags, file], { input: sql, encoding: "utf8", timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The query docs/store.md gives for a job's last runs (kept in step with it). */
const LAST_RUNS = `SELECT id, status, datetime(started_at / 1000, 'unixepoch') AS started, duration_ms
FROM runs WHERE job = 'report' ORDER BY id DESC LIMIT 5;`;

test("docs/store.md's query is the one this test runs", () => {
  const doc = fs.readFileSync(new URL("../docs/store.md", import.meta.url), "utf8");
  assert.ok(doc.includes(LAST_RUNS.replace("'report'", "'backup'")), "docs/store.md: last runs");
});

/**
 * A store at schema version `upTo` as an earlier cronvisor left it (migrations applied by hand,
 * as store-interface.test.js does), in WAL mode like every store.
 */
function storeAt(stateDir, upTo) {
  fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const db = new Database(path.join(stateDir, "cronvisor.db"));
  db.pragma("journal_mode = WAL");
  const dir = new URL("../dist/store/migrations/sqlite/", import.meta.url);
  for (const f of migrationFiles().slice(0, upTo)) db.exec(migrationText(dir, f, "sqlite"));
  db.pragma(`user_version = ${upTo}`);
  db.close();
}

test(
  "a store migrated from version 9 with real runs: sqlite3 checks, backs up and queries it",
  needs(skip),
  (t) => {
    const dir = tmpdir(t);
    const stateDir = path.join(dir, "state");
    const mark = `'"${process.execPath}" "${BIN}" mark "k-$CRONVISOR_RUN_ID"'`;
    const cfg = writeConfig(
      dir,
      `state_dir: ./state
jobs:
  report: { schedule: "0 3 * * *", command: ${mark} }
  flaky: { schedule: "0 3 * * *", command: "exit 3" }
`,
    );
    storeAt(stateDir, 9);
    const file = path.join(stateDir, "cronvisor.db");
    // The bug: the view of migration 006 makes the whole file unreadable for 3.40.
    const before = sqlite3(file, "PRAGMA integrity_check;");
    assert.notEqual(before.code, 0, before.stdout);
    assert.match(before.stderr, /malformed database schema/);

    for (let i = 0; i < 3; i++) {
      const r = cli(["run", "report", "-c", cfg]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(cli(["run", "flaky", "-c", cfg]).code, 3);
    }
    const check = sqlite3(file, "PRAGMA integrity_check;");
    assert.equal(check.code, 0, check.stderr);
    assert.equal(check.stdout.trim(), "ok");

    const copy = path.join(dir, "copy.db");
    const backup = sqlite3(file, `.backup '${copy}'\n`);
    assert.equal(backup.code, 0, backup.stderr);
    const last = sqlite3(copy, LAST_RUNS, "-separator", "|");
    assert.equal(last.code, 0, last.stderr);
    const lines = last.stdout.trim().split("\n");
    assert.equal(lines.length, 3, last.stdout);
    for (const l of lines) assert.match(l, /^\d+\|ok\|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\|\d+$/);
    const ids = lines.map((l) => Number(l.split("|")[0]));
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => b - a),
      "newest first",
    );
    const markers = sqlite3(copy, "SELECT count(*) FROM markers WHERE job = 'report';");
    assert.equal(markers.stdout.trim(), "3");

    // The rewritten view and trigger keep the summary as before: newest first, the streak counted.
    const [flaky] = sqlite3(
      copy,
      "SELECT json_extract(recent_runs, '$[0][0]') > json_extract(recent_runs, '$[2][0]'), failing_streak, json_array_length(recent_runs) FROM jobs WHERE name = 'flaky';",
    )
      .stdout.trim()
      .split("\n");
    assert.equal(flaky, "1|3|3");
    // status reads the migrated store (the summary columns it reads were rebuilt by the triggers).
    const st = JSON.parse(cli(["status", "--json", "-c", cfg]).stdout);
    assert.equal(st.jobs.find((j) => j.name === "report").markers, 3);
  },
);

/** SQL syntax newer than SQLite 3.31 that a schema object could hold, with the version. */
const NEWER = [
  [/->/, "the -> and ->> operators (3.38)"],
  [/\biif\s*\(/i, "iif() (3.32)"],
  [
    /\b(unixepoch|format|unhex|octet_length|timediff|concat|concat_ws|string_agg)\s*\(/i,
    "a function of 3.38 or later",
  ],
  [/\bIS\s+(NOT\s+)?DISTINCT\s+FROM\b/i, "IS DISTINCT FROM (3.39)"],
  [/\b(RIGHT|FULL)\s+(OUTER\s+)?JOIN\b/i, "RIGHT/FULL JOIN (3.39)"],
  [/\b(NOT\s+)?MATERIALIZED\b/i, "MATERIALIZED (3.35)"],
  [/\)\s*STRICT\b/i, "STRICT tables (3.37)"],
  [/\bRETURNING\b/i, "RETURNING (3.35)"],
];

/**
 * Each parenthesised group of `sql` that is a function's arguments (not a subquery, not a
 * window's OVER (...)) and has an ORDER BY of its own: an aggregate's ORDER BY (3.44).
 */
function aggregateOrderBy(sql) {
  const found = [];
  const stack = [];
  for (let i = 0; i < sql.length; i++) {
    if (sql[i] === "(") stack.push(i);
    else if (sql[i] === ")") {
      const open = stack.pop();
      const inner = sql.slice(open + 1, i);
      // Remove nested groups so that only this level's words count.
      let flat = "";
      let depth = 0;
      for (const ch of inner) {
        if (ch === "(") depth++;
        if (depth === 0) flat += ch;
        if (ch === ")") depth--;
      }
      const before = sql.slice(0, open).trimEnd();
      const isCall =
        /[A-Za-z_]\w*$/.test(before) && !/\b(OVER|IN|AS|VALUES|ON|EXISTS)$/i.test(before);
      if (isCall && !/^\s*SELECT\b/i.test(flat) && /\bORDER\s+BY\b/i.test(flat))
        found.push(sql.slice(Math.max(0, open - 30), i + 1));
    }
  }
  return found;
}

test("the stored schema uses no SQL newer than SQLite 3.31", (t) => {
  // The checker catches what it must: migration 006's view and 008's trigger as they were.
  assert.equal(aggregateOrderBy("SELECT json_group_array(x ORDER BY id DESC) FROM t").length, 1);
  assert.equal(aggregateOrderBy("SELECT row_number() OVER (ORDER BY d) FROM t").length, 0);
  assert.equal(
    aggregateOrderBy("SELECT max(a) FROM (SELECT a FROM t ORDER BY a LIMIT 3)").length,
    0,
  );

  const dir = tmpdir(t);
  storeAt(dir, migrationFiles().length);
  const db = new Database(path.join(dir, "cronvisor.db"), { readonly: true });
  const objects = db
    .prepare("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")
    .all();
  db.close();
  assert.ok(
    objects.some((o) => o.name === "job_summary") && objects.some((o) => o.name === "job_verdicts"),
  );
  const problems = [];
  for (const o of objects) {
    const sql = o.sql.replace(/--[^\n]*/g, "").replace(/'(?:[^']|'')*'/g, "''");
    for (const [re, what] of NEWER) if (re.test(sql)) problems.push(`${o.type} ${o.name}: ${what}`);
    for (const g of aggregateOrderBy(sql))
      problems.push(`${o.type} ${o.name}: aggregate ORDER BY (3.44) in ${g}`);
  }
  assert.deepEqual(problems, []);
});

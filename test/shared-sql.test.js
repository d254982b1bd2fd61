// The store's shared SQL (src/store/queries/, issue 38): each statement is written once, with
// $1..$n, and runs on both engines. Every shared statement compiles on a freshly migrated store
// of each engine (SQLite prepares the text Conn.q makes of it; PostgreSQL PREPAREs it), and no
// SQLite statement appears again word for word in postgres/ (scripts/sql-dupes.js).
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Database from "better-sqlite3";
import { POSTGRES, SQLITE, sqlitePlaceholders } from "../dist/store/queries/sql.js";
import { openConn } from "../dist/store/connection.js";
import { openPgStore, openStore } from "../dist/store/store.js";
import { count } from "../scripts/sql-dupes.js";
import { tmpdir } from "./helpers.js";
import { needs } from "./needs.js";
import { freshDatabase, pgMissing, rawClient } from "./pg.js";

const DIR = new URL("../dist/store/queries/", import.meta.url);
const STATEMENT = /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/;

/**
 * The statements an engine's dialect makes of each builder. A builder missing here fails the
 * test: each new one gets its calls (every shape it makes) in the same commit.
 */
const BUILDERS = {
  "jobs.setScannedTo": (m, d) => [m.setScannedTo(d)],
  "markers.jobWorked": (m, d) => [m.jobWorked(d, false), m.jobWorked(d, true)],
  "markers.fenceValid": (m, d) => [m.fenceValid(d)],
  "chains.settledChain": (m, d) => [m.settledChain(d)],
  "holds.holdsHeld": (m, d) => [m.holdsHeld(d)],
  "status.summarySql": (m) => [m.summarySql(true), m.summarySql(false)],
  "daemon.daemonSql": (m, d) => Object.values(m.daemonSql(d)),
};

/** Every shared statement as `engine` runs it: the constants, and each builder's shapes. */
async function shared(engine) {
  const d = engine === "sqlite" ? SQLITE : POSTGRES;
  const out = [];
  for (const file of fs.readdirSync(DIR).filter((f) => f.endsWith(".js"))) {
    if (file === "sql.js") continue;
    const mod = await import(new URL(file, DIR).href);
    const group = path.basename(file, ".js");
    for (const [name, v] of Object.entries(mod)) {
      if (typeof v === "string") {
        if (STATEMENT.test(v)) out.push([`${group}.${name}`, v]);
        continue;
      }
      const made = BUILDERS[`${group}.${name}`];
      assert.ok(made, `queries/${file}: builder ${name} has no entry in BUILDERS`);
      made(mod, d).forEach((s, i) => out.push([`${group}.${name}#${i}`, s]));
    }
  }
  return out;
}

test("sqlitePlaceholders: $1..$n in order become ?; a repeated or out-of-order one throws", () => {
  assert.equal(sqlitePlaceholders("SELECT $1, $2 WHERE x = $3"), "SELECT ?, ? WHERE x = ?");
  assert.equal(sqlitePlaceholders("SELECT 1"), "SELECT 1");
  assert.throws(() => sqlitePlaceholders("SELECT $1, $1"), /\$1 where \$2 was due/);
  assert.throws(() => sqlitePlaceholders("SELECT $2, $1"), /\$2 where \$1 was due/);
});

test("Conn.q: a shared statement binds positionally, read as objects in one place and arrays in another", (t) => {
  const c = openConn(tmpdir(t), { create: true });
  t.after(() => c.close());
  const sql = "SELECT $1 AS a, $2 AS b";
  assert.deepEqual(c.q(sql).get(1, "x"), { a: 1, b: "x" });
  assert.deepEqual(c.q(sql, true).get(2, "y"), [2, "y"]);
  assert.deepEqual(c.q(sql).get(3, "z"), { a: 3, b: "z" });
});

test("every shared statement compiles on a freshly migrated SQLite store", async (t) => {
  const dir = tmpdir(t);
  await (await openStore(dir, { create: true })).close();
  const db = new Database(path.join(dir, "cronvisor.db"), { readonly: true });
  t.after(() => db.close());
  const list = await shared("sqlite");
  assert.ok(list.length > 50, `${list.length} shared statements`);
  for (const [name, sql] of list)
    assert.doesNotThrow(() => db.prepare(sqlitePlaceholders(sql)), `${name}: ${sql}`);
});

test(
  "every shared statement compiles on a freshly migrated PostgreSQL database",
  needs(pgMissing()),
  async (t) => {
    const url = await freshDatabase();
    await (await openPgStore(url, { create: true, poolSize: 1 })).close();
    const c = await rawClient(url, t);
    const list = await shared("postgresql");
    for (const [i, [name, sql]] of list.entries()) {
      await assert.doesNotReject(c.query(`PREPARE s${i} AS ${sql}`), `${name}: ${sql}`);
    }
  },
);

test("no SQLite statement is written again word for word in postgres/", () => {
  const { dupes } = count();
  assert.deepEqual(
    dupes,
    [],
    "share them in src/store/queries/ (node scripts/sql-dupes.js --list)",
  );
});

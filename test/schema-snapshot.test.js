// schema/sqlite.sql and schema/postgresql.sql are what the migrations make of a new store
// (scripts/schema-snapshot.js): a migration that changes the schema changes them in the same
// commit, so a reviewer sees its effect.
import assert from "node:assert/strict";
import fs from "node:fs";
import test from "node:test";
import { REGENERATE, SNAPSHOTS, postgresSchema, sqliteSchema } from "../scripts/schema-snapshot.js";
import { needs } from "./needs.js";
import { PG_BIN, freshDatabase, pgMissing } from "./pg.js";

const stale = (engine) =>
  `${SNAPSHOTS[engine]} differs from a freshly migrated store: run ${REGENERATE}`;

test("schema/sqlite.sql is a freshly migrated SQLite store's schema", async () => {
  const text = await sqliteSchema();
  assert.match(text, /CREATE TABLE runs/);
  assert.equal(fs.readFileSync(SNAPSHOTS.sqlite, "utf8"), text, stale("sqlite"));
});

test(
  "schema/postgresql.sql is a freshly migrated PostgreSQL store's schema",
  needs(pgMissing()),
  async () => {
    const text = await postgresSchema(await freshDatabase(), PG_BIN);
    assert.match(text, /CREATE TABLE public\.runs/);
    assert.equal(fs.readFileSync(SNAPSHOTS.postgresql, "utf8"), text, stale("postgresql"));
  },
);

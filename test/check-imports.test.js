// The import checker (scripts/check-imports.js) and the map it feeds: ARCHITECTURE.md's import
// table is the checker's own output, the files the map names exist, and the folder rules reject
// the arrows issue 38 removed (monitor/ -> daemon/, markers/ or health/ -> run/).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import test from "node:test";
import { importTable, withTable } from "../scripts/check-imports.js";
import { ROOT, tmpdir } from "./helpers.js";

const CHECKER = path.join(ROOT, "scripts", "check-imports.js");
const ARCH = path.join(ROOT, "ARCHITECTURE.md");

test("ARCHITECTURE.md's import table is the checker's (regenerate: node scripts/check-imports.js --write-table)", () => {
  const text = fs.readFileSync(ARCH, "utf8");
  const regenerated = withTable(text, importTable());
  assert.ok(regenerated !== null, "ARCHITECTURE.md has no generated import table block");
  assert.equal(
    text,
    regenerated,
    "ARCHITECTURE.md's import table is stale: run node scripts/check-imports.js --write-table",
  );
  assert.match(importTable(), /\n\| daemon\/ \| commands \|\n/);
});

test("ARCHITECTURE.md: at most 150 lines, one slot's path first, and every file it names exists", () => {
  const text = fs.readFileSync(ARCH, "utf8");
  assert.ok(text.split("\n").length <= 151, `${text.split("\n").length} lines`);
  const headings = [...text.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
  assert.equal(headings[0], "One slot's path");
  const named = new Set(
    [...text.matchAll(/`((?:[a-z]+\/)+[a-z0-9.-]+\.(?:ts|c))`/g)].map((m) => m[1]),
  );
  assert.ok(named.size >= 30, `${named.size} files named`);
  const missing = [...named].filter(
    (f) =>
      !fs.existsSync(path.join(ROOT, "src", f)) &&
      !fs.existsSync(path.join(ROOT, "src", "store", f)),
  );
  assert.deepEqual(missing, [], "files ARCHITECTURE.md names that are not in src/");
});

/** The checker's exit code and output on a tree of `files` ({ "monitor/a.ts": "source" }). */
function check(t, files) {
  const root = tmpdir(t);
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    fs.writeFileSync(path.join(root, name), text);
  }
  const r = spawnSync(process.execPath, [CHECKER, root], { encoding: "utf8" });
  return { code: r.status, out: r.stdout + r.stderr };
}

test("the checker rejects monitor/ importing daemon/ (even a type) and markers/ importing run/", (t) => {
  const base = {
    "daemon/runtime.ts":
      'import type { SupervisorHooks } from "../monitor/hooks.js";\nexport type R = SupervisorHooks;\n',
    "monitor/hooks.ts": "export interface SupervisorHooks { beat?(): void }\n",
    "run/env.ts": "export const env = 1;\n",
    "core/proc.ts": "export const alive = true;\n",
    "markers/once.ts": 'import { alive } from "../core/proc.js";\nexport const a = alive;\n',
  };
  const clean = check(t, base);
  assert.equal(clean.code, 0, clean.out);
  assert.match(clean.out, /no cycles, every import follows the folder table/);

  const bad = check(t, {
    ...base,
    "monitor/monitor.ts": 'import type { R } from "../daemon/runtime.js";\nexport type M = R;\n',
    "markers/once.ts": 'import { env } from "../run/env.js";\nexport const a = env;\n',
  });
  assert.equal(bad.code, 1, bad.out);
  assert.match(
    bad.out,
    /monitor\/monitor\.ts:1: forbidden import \(type-only import\): monitor\/ may not import daemon\/runtime\.ts/,
  );
  assert.match(
    bad.out,
    /markers\/once\.ts:1: forbidden import: markers\/ may not import run\/env\.ts/,
  );
  assert.match(bad.out, /0 cycle\(s\), 2 forbidden import\(s\)/);
});

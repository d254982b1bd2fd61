// scripts/check-imports.js on small trees written here: it must reject a cycle (printing the
// chain), count lazy and type-only imports, ignore imports that are only text, and enforce the
// folder table; and pass a clean tree.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ROOT, tmpdir } from "./helpers.js";

const SCRIPT = path.join(ROOT, "scripts", "check-imports.js");

/** Write files ({ "a.ts": text }) under a fresh dir and run the checker on it. */
function check(t, files) {
  const dir = tmpdir(t, "cvx-lint-");
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  const r = spawnSync(process.execPath, [SCRIPT, dir], { cwd: ROOT, encoding: "utf8" });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("a cycle a.ts -> b.ts -> a.ts exits 1 and prints the chain with lines", (t) => {
  const r = check(t, {
    "a.ts": 'import { b } from "./b.js";\nexport const a = () => b;\n',
    "b.ts": '// b needs a\nimport { a } from "./a.js";\nexport const b = () => a;\n',
  });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /^import cycle: a\.ts:1 -> b\.ts:2 -> a\.ts$/m);
  assert.match(r.stderr, /1 cycle\(s\), 0 forbidden import\(s\)/);
});

test("a clean tree exits 0", (t) => {
  const r = check(t, {
    "a.ts": 'import { b } from "./b.js";\nexport const a = () => b;\n',
    "b.ts": "export const b = 1;\n",
    "c.ts": 'export { a } from "./a.js";\nexport type { B } from "./d.js";\n',
    "d.ts": "export type B = number;\n",
  });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, "");
  assert.match(r.stdout, /4 files, 3 imports: no cycles/);
});

test("a lazy import() and a type-only import close a cycle too, and are named", (t) => {
  const r = check(t, {
    "a.ts": 'export async function f() {\n  return (await import("./b.js")).b;\n}\n',
    "b.ts": 'import type { T } from "./c.js";\nexport const b: T = 1;\n',
    "c.ts": 'import { f } from "./a.js";\nexport type T = number;\nexport const g = f;\n',
  });
  assert.equal(r.code, 1, r.stderr);
  assert.match(
    r.stderr,
    /^import cycle: a\.ts:2 \(dynamic import\) -> b\.ts:1 \(type-only import\) -> c\.ts:1 -> a\.ts$/m,
  );
});

test("a self-import and two separate cycles are each reported", (t) => {
  const r = check(t, {
    "s.ts": 'export * from "./s.js";\n',
    "x/a.ts": 'import "./b.js";\n',
    "x/b.ts": 'import "./a.js";\n',
  });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /^import cycle: s\.ts:1 -> s\.ts$/m);
  assert.match(r.stderr, /^import cycle: x\/a\.ts:1 -> x\/b\.ts:1 -> x\/a\.ts$/m);
});

test("an import named only in a comment or a string is not an import", (t) => {
  const r = check(t, {
    "a.ts": 'import { b } from "./b.js";\nexport const a = b;\n',
    "b.ts": '// not: import { a } from "./a.js"\nexport const b = \'import("./a.js")\';\n',
  });
  assert.equal(r.code, 0, r.stderr);
});

test("imports against the folder table are rejected, allowed ones pass", (t) => {
  const r = check(t, {
    "core/types.ts": 'import type { Row } from "../store/rows.js";\nexport type Id = Row;\n',
    "store/rows.ts": "export type Row = number;\n",
    "markers/m.ts": 'import "../core/proc.js";\nimport "../run/env.js";\n',
    "core/proc.ts": "export {};\n",
    "run/env.ts": 'import type { Id } from "../core/types.js";\nexport type E = Id;\n',
  });
  assert.equal(r.code, 1, r.stderr);
  assert.match(
    r.stderr,
    /^core\/types\.ts:1: forbidden import \(type-only import\): core\/ may not import store\/rows\.ts/m,
  );
  assert.match(
    r.stderr,
    /^markers\/m\.ts:2: forbidden import: markers\/ may not import run\/env\.ts/m,
  );
  assert.doesNotMatch(r.stderr, /core\/proc\.ts/); // markers may import core/proc.ts
  assert.match(r.stderr, /0 cycle\(s\), 2 forbidden import\(s\)/);
});

test("a folder missing from the table is reported", (t) => {
  const r = check(t, {
    "newstage/x.ts": 'import "../core/y.js";\n',
    "core/y.ts": "export {};\n",
  });
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /folder newstage\/ is not in the import table/);
});

test("a missing root is a usage error", (t) => {
  const r = spawnSync(process.execPath, [SCRIPT, path.join(tmpdir(t), "nope")], {
    encoding: "utf8",
  });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /usage: node scripts\/check-imports\.js \[ROOT\]/);
});

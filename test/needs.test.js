// test/needs.js's rule, run for real: a child `node --test` whose cases lack a tool skips them
// saying what is missing, and under CI=true fails them saying the same (exit 1).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import test from "node:test";
import { pathToFileURL } from "node:url";
import { ROOT, tmpdir } from "./helpers.js";

const NEEDS = pathToFileURL(path.join(ROOT, "test", "needs.js")).href;

/** The child's output and exit code with CI set to `ci` ("" for unset). */
function child(dir, ci) {
  const file = path.join(dir, "lacks.test.mjs");
  fs.writeFileSync(
    file,
    `import test from "node:test";
import { needs, needsNow } from ${JSON.stringify(NEEDS)};
test("option form", needs("frobnicate is not installed"), () => {});
test("inside the test", (t) => {
  if (needsNow(t, "gizmo is not installed")) return;
});
test("nothing missing", needs(false), () => {});
`,
  );
  // Without the parent's NODE_TEST_CONTEXT, else the child's runner defers to this one's.
  const { NODE_TEST_CONTEXT: _parent, ...rest } = process.env;
  const env = { ...rest, CI: ci };
  const r = spawnSync(process.execPath, ["--test", "--test-reporter=tap", file], {
    env,
    encoding: "utf8",
    timeout: 30_000,
  });
  return { code: r.status, out: r.stdout + r.stderr };
}

test("without CI a missing tool skips the test with its reason; with CI=true it fails with it", (t) => {
  const dir = tmpdir(t);
  const dev = child(dir, "");
  assert.equal(dev.code, 0, dev.out);
  assert.match(dev.out, /# SKIP frobnicate is not installed/);
  assert.match(dev.out, /# SKIP gizmo is not installed/);
  assert.match(dev.out, /# pass 1\n/);

  const ci = child(dir, "true");
  assert.equal(ci.code, 1, ci.out);
  assert.doesNotMatch(ci.out, /# SKIP/);
  assert.match(ci.out, /CI is set and this test cannot run: frobnicate is not installed/);
  assert.match(ci.out, /CI is set and this test cannot run: gizmo is not installed/);
  assert.match(ci.out, /# pass 1\n/);
});

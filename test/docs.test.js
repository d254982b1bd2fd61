// The documentation as a newcomer meets it (issue 37): a README short enough to read, every
// docs/ file starting with an example that runs, every example marked `<!-- runnable -->` still
// running (a YAML one still valid), and every link between the files reaching a file and a
// heading that exist.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { BIN, ROOT, cleanEnv, cli, tmpdir } from "./helpers.js";

const README = path.join(ROOT, "README.md");
const DOCS = path.join(ROOT, "docs");
const FILES = [
  README,
  ...fs
    .readdirSync(DOCS)
    .filter((f) => f.endsWith(".md"))
    .map((f) => path.join(DOCS, f)),
];
const rel = (f) => path.relative(ROOT, f);
/** docs/ files whose first example cannot run in a test, and why. */
const FIRST_NOT_RUNNABLE = {
  "docs/install.md":
    "installs into /usr/local as root; test/install.test.js runs it in a throwaway prefix",
  "docs/safety.md":
    "sets up /etc/cronvisor and /var/lib/cronvisor as root; test/security*.test.js and test/broker*.test.js hold the same rules in temp dirs",
  "docs/node-failure.md":
    "reads a two-node PostgreSQL setup's history; test/nodes-failover.test.js makes and checks one",
  "docs/store.md":
    "backs up the store /etc/cronvisor/jobs.yaml names; test/store-backup.test.js and test/store-sqlite3.test.js run backup, restore and the sqlite3 query",
};

/** Fenced code blocks: { lang, text, runnable, line }. */
function blocks(file) {
  const out = [];
  const lines = fs.readFileSync(file, "utf8").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.indexOf("```", i + 1);
    assert.ok(end > i, `${rel(file)}:${i + 1}: a code block that does not end`);
    out.push({
      lang: open[1],
      text: lines.slice(i + 1, end).join("\n"),
      runnable: lines[i - 1] === "<!-- runnable -->",
      line: i + 1,
    });
    i = end;
  }
  return out;
}

/** GitHub's anchor of a heading. */
const anchor = (heading) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");

test("the README is at most 400 lines, and leads to every docs/ file", () => {
  const text = fs.readFileSync(README, "utf8");
  const n = text.split("\n").length - 1;
  assert.ok(n <= 400, `README.md has ${n} lines`);
  for (const f of FILES.slice(1))
    assert.ok(text.includes(`](${rel(f)})`), `README links ${rel(f)}`);
  // Exactly two set-up commands in the quick start: the daemon on the example, and the tests.
  const quick = blocks(README)[0].text.split("\n");
  assert.deepEqual(
    quick.map((l) => l.replace(/\s+#.*$/, "")),
    ["npm install && npm start", "npm install && npm test"],
  );
});

test("every docs/ file starts with a runnable example", () => {
  for (const f of FILES.slice(1)) {
    const first = blocks(f)[0];
    assert.ok(first, `${rel(f)} has an example`);
    if (FIRST_NOT_RUNNABLE[rel(f)]) continue;
    assert.ok(first.runnable, `${rel(f)}:${first.line}: its first example is marked runnable`);
  }
});

test("every link between README.md and docs/ reaches a file and a heading", () => {
  const headings = new Map(
    FILES.map((f) => [
      f,
      new Set(
        fs
          .readFileSync(f, "utf8")
          .split("\n")
          .filter((l) => /^#{1,6} /.test(l))
          .map((l) => anchor(l.replace(/^#+ /, ""))),
      ),
    ]),
  );
  for (const f of FILES) {
    const text = fs.readFileSync(f, "utf8").replace(/```[\s\S]*?```/g, "");
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue; // a URL
      const [file, hash] = target.split("#");
      const to = file === "" ? f : path.resolve(path.dirname(f), file);
      assert.ok(fs.existsSync(to), `${rel(f)}: ${target}: no such file`);
      if (hash && to.endsWith(".md"))
        assert.ok(headings.get(to)?.has(hash), `${rel(f)}: ${target}: no such heading`);
    }
  }
});

/** Run a shell block in `dir` with the built CLI as `cronvisor`; its whole group is ended after. */
function runBlock(text, dir) {
  const bin = path.join(dir, "bin");
  fs.mkdirSync(bin, { recursive: true });
  fs.writeFileSync(
    path.join(bin, "cronvisor"),
    `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"\n`,
    { mode: 0o755 },
  );
  return new Promise((resolve) => {
    const child = spawn("sh", ["-e", "-c", text], {
      cwd: dir,
      env: cleanEnv({ PATH: `${bin}:${path.dirname(process.execPath)}:/usr/bin:/bin` }),
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => process.kill(-child.pid, "SIGKILL"), 60_000);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      try {
        process.kill(-child.pid, "SIGKILL"); // a daemon the block left behind
      } catch {
        // the group is gone
      }
      resolve({ code, signal, out });
    });
  });
}

for (const f of FILES)
  for (const b of blocks(f).filter((x) => x.runnable))
    test(`${rel(f)}:${b.line}: the ${b.lang} example runs`, async (t) => {
      const dir = tmpdir(t, "cvx-doc-");
      if (b.lang === "yaml") {
        fs.writeFileSync(path.join(dir, "jobs.yaml"), b.text);
        const r = cli(["validate", "-c", path.join(dir, "jobs.yaml")]);
        assert.equal(r.code, 0, r.stdout + r.stderr);
        return;
      }
      assert.equal(b.lang, "sh", "a runnable block is sh or yaml");
      const r = await runBlock(b.text, dir);
      assert.equal(r.code, 0, r.out);
    });

// The CLI surface: help with examples, import-crontab end to end, usage errors.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ROOT, cli, tmpdir } from "./helpers.js";

const COMMANDS = [
  "daemon",
  "validate",
  "status",
  "run",
  "reload",
  "history",
  "logs",
  "next",
  "mark",
  "check",
  "once",
  "progress",
  "pause",
  "resume",
  "markers",
  "unmark",
  "import-crontab",
];

test("--help lists every command, and each command's help has an example line", () => {
  const top = cli(["--help"]);
  assert.equal(top.code, 0);
  for (const c of COMMANDS) assert.match(top.stdout, new RegExp(`^\\s+${c}\\b`, "m"), c);
  for (const c of COMMANDS) {
    const h = cli([c, "--help"]);
    assert.equal(h.code, 0, c);
    assert.match(h.stdout, /Example:\n {2}.*cronvisor /, `${c} --help has an example`);
  }
});

test("import-crontab prints YAML that validates as is; a bad line is named with exit 2; --skip-invalid carries on", (t) => {
  const dir = tmpdir(t);
  const src = path.join(ROOT, "test", "fixtures", "crontab", "user.crontab");
  const r = cli(["import-crontab", src]);
  assert.equal(r.code, 0, r.stderr);
  const out = path.join(dir, "jobs.yaml");
  fs.writeFileSync(
    out,
    r.stdout
      .replace(/^state_dir:.*$/m, "")
      .replace(/^(# yaml-language-server.*)$/m, `$1\nstate_dir: ${dir}/state`),
  );
  const v = cli(["validate", "-c", out]);
  assert.equal(v.code, 0, v.stderr);
  const bad = path.join(dir, "bad.crontab");
  fs.writeFileSync(bad, "# fine\n*/5 * * * * echo ok\n61 * * * * echo bad minute\n");
  const b = cli(["import-crontab", bad]);
  assert.equal(b.code, 2);
  assert.match(b.stderr, new RegExp(`${bad}: line 3: `));
  const s = cli(["import-crontab", "--skip-invalid", bad]);
  assert.equal(s.code, 0, s.stderr);
  assert.match(s.stdout, /echo ok/);
  const stdin = cli(["import-crontab", "-"], { input: "@daily /usr/local/bin/backup.sh\n" });
  assert.equal(stdin.code, 0, stdin.stderr);
  assert.match(stdin.stdout, /backup:\n/);
});

test("unknown commands and bad options are usage errors (exit 2)", () => {
  assert.equal(cli(["frobnicate"]).code, 2);
  assert.equal(cli(["history", "--limit", "zero"]).code, 2);
  assert.equal(cli(["status", "--bogus"]).code, 2);
});

// A `user:` job's `cwd:` is entered by the job's user, after the privilege drop (issue 36): a job
// user who replaces its own working directory with a link into a directory only root can reach
// must not have root walk through it for them. Run for real, by `cronvisor run` and by the daemon
// (whose spawner starts the run), as a throwaway user.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  cli,
  readStore,
  runAs,
  startDaemon,
  stopDaemon,
  testUser,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needs, needsNow } from "./needs.js";

const SECRET = "root's eyes only";

/**
 * dir (0711) with private/ (root's, 0700) holding pub/secret.txt (0755 and 0644: readable by
 * anyone who can reach it), home/ (the user's) whose work/ is the job's cwd, and out/ (the
 * user's). The job reads secret.txt relative to its cwd and says where it is.
 */
function setUp(t, user) {
  const dir = tmpdir(t);
  fs.chmodSync(dir, 0o711);
  const pub = path.join(dir, "private", "pub");
  fs.mkdirSync(pub, { recursive: true, mode: 0o755 });
  fs.chmodSync(path.join(dir, "private"), 0o700);
  fs.writeFileSync(path.join(pub, "secret.txt"), `${SECRET}\n`, { mode: 0o644 });
  const home = path.join(dir, "home");
  const work = path.join(home, "work");
  const out = path.join(dir, "out");
  for (const d of [home, work, out]) {
    fs.mkdirSync(d, { mode: 0o755 });
    fs.chownSync(d, user.uid, user.gid);
  }
  const cfg = writeConfig(
    dir,
    `env: { OUT: "${out}" }
jobs:
  peek:
    schedule: "@reboot"
    user: ${user.name}
    cwd: ${work}
    command: 'cat secret.txt > "$OUT/got" 2>&1; pwd -P >> "$OUT/got"'
`,
  );
  // The attack: the user swaps their own directory for a link into root's.
  const swap = () => {
    assert.equal(runAs(user, ["rm", "-r", work]).code, 0);
    assert.equal(runAs(user, ["ln", "-s", pub, work]).code, 0);
  };
  const got = () => {
    const f = path.join(out, "got");
    return fs.existsSync(f) ? fs.readFileSync(f, "utf8") : "";
  };
  return { dir, cfg, work, out, swap, got, state: path.join(dir, ".cronvisor") };
}

test(
  "root: a user: job whose cwd its user swapped for a link into a root-only directory does not start there (run and daemon)",
  needs(process.getuid?.() === 0 ? false : "running a job as another user needs root"),
  async (t) => {
    const user = testUser();
    // Root, but no second user (testUser's reason); in CI never.
    if (needsNow(t, user.skip)) return;
    const s = setUp(t, user);
    // Before the swap: the job runs in its own directory.
    const ok = cli(["run", "-c", s.cfg, "peek"]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(s.got(), /No such file/);
    fs.rmSync(path.join(s.out, "got"));
    s.swap();
    const r = cli(["run", "-c", s.cfg, "peek"]);
    assert.doesNotMatch(s.got(), new RegExp(SECRET), "the job read the root-only file");
    assert.notEqual(r.code, 0, "the run failed");
    assert.match(r.stdout + r.stderr, new RegExp(`cannot enter its cwd ${s.work}`));
    // The daemon's spawner: the same.
    const d = startDaemon(t, s.cfg);
    const run = await waitFor(
      () =>
        readStore(s.state)
          .ended()
          .find((r) => r.trigger !== "manual"),
      "the daemon's run of peek",
    );
    await stopDaemon(d);
    assert.doesNotMatch(s.got(), new RegExp(SECRET), "the job read the root-only file");
    assert.equal(run.status, "failed");
    const log = fs.readFileSync(run.log_path, "utf8");
    assert.match(log, new RegExp(`cannot enter its cwd ${s.work}`));
  },
);

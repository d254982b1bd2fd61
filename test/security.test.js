// Attacks from a local user on the same host: each test does what an attacker would and asserts
// that nothing leaks, nothing outside the state dir changes, and the daemon keeps serving.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import { startRun } from "../dist/run/runner.js";
import {
  cli,
  freePort,
  readStore,
  request,
  startDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needs } from "./needs.js";

test("http: 200 connections that never finish a request do not keep /healthz blind for more than 5 s", async (t) => {
  const dir = tmpdir(t);
  const port = await freePort();
  const cfg = writeConfig(dir, `heartbeat: 1s\nhttp: 127.0.0.1:${port}\njobs: {}\n`);
  startDaemon(t, cfg);
  await waitFor(
    async () => (await request(port, { path: "/healthz" }).catch(() => ({}))).status === 200,
    "healthz 200",
  );
  // Half of them send nothing, half send a request line and then stall (slowloris).
  const sockets = [];
  t.after(() => sockets.forEach((s) => s.destroy()));
  await Promise.all(
    Array.from(
      { length: 200 },
      (_, i) =>
        new Promise((resolve) => {
          const s = net.connect(port, "127.0.0.1", () => {
            if (i % 2) s.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n");
            resolve();
          });
          s.on("error", resolve);
          sockets.push(s);
        }),
    ),
  );
  const opened = Date.now();
  await waitFor(
    async () =>
      (await request(port, { path: "/healthz", timeoutMs: 1000 }).catch(() => ({}))).status === 200,
    "healthz 200 while 200 idle connections are open",
    5_000,
  );
  const took = Date.now() - opened;
  assert.ok(took <= 5_000, `${took} ms`);
  t.diagnostic(`healthz answered again after ${took} ms`);
});

// The attacks below target a root daemon and its service users: skipped, with this reason,
// only when the tests do not run as root; in CI, which runs as root, never.
const asRoot = process.getuid?.() === 0;
const notRoot = asRoot ? false : "the checks apply to a daemon running as root";

/** A config whose one job reads `envFile`, and a second job that must keep running. */
function envConfig(dir, envFile, extra = "") {
  return writeConfig(
    dir,
    [
      "heartbeat: 1s",
      "jobs:",
      "  victim:",
      '    schedule: "@daily"',
      "    command: env",
      `    env_file: ${envFile}`,
      extra,
      "",
    ].join("\n"),
  );
}

test(
  "root: a config, state dir or env_file under a directory another user owns is refused by daemon and run (exit 2)",
  needs(notRoot),
  (t) => {
    const dir = tmpdir(t);
    // The attacker's directory: they could swap the state dir or the env_file for a link at will.
    const theirs = path.join(dir, "theirs");
    fs.mkdirSync(theirs, { mode: 0o755 });
    fs.chownSync(theirs, 4242, 4242);
    const cases = [
      // A root-owned config in a directory the user owns, with the default ./.cronvisor state dir.
      {
        cfg: writeConfig(theirs, "jobs:\n  a:\n    schedule: '@daily'\n    command: 'true'\n"),
        named: theirs,
      },
      // An env_file in the user's directory.
      { cfg: envConfig(dir, path.join(theirs, "x.env")), named: theirs },
    ];
    fs.writeFileSync(path.join(theirs, "x.env"), "A=1\n");
    for (const { cfg, named } of cases) {
      for (const args of [["daemon"], ["run", cfg.endsWith("theirs/jobs.yaml") ? "a" : "victim"]]) {
        const r = cli([...args, "-c", cfg]);
        assert.equal(r.code, 2, `${args[0]}: ${r.stderr}`);
        assert.match(r.stderr, new RegExp(`${named} is owned by uid 4242`));
        assert.doesNotMatch(r.stderr, /\n\s+at /);
      }
    }
    assert.equal(fs.existsSync(path.join(theirs, ".cronvisor")), false, "no state dir made there");
  },
);

test(
  "root: an env_file that is a link, or owned by another user for a root job, is refused at start",
  needs(notRoot),
  (t) => {
    const dir = tmpdir(t);
    const secret = path.join(dir, "root-only");
    fs.writeFileSync(secret, "TOKEN=s3cret\n", { mode: 0o600 });
    const link = path.join(dir, "link.env");
    fs.symlinkSync(secret, link);
    const r1 = cli(["daemon", "-c", envConfig(dir, link)]);
    assert.equal(r1.code, 2, r1.stderr);
    assert.match(r1.stderr, /link\.env is a symbolic link/);
    const owned = path.join(dir, "owned.env");
    fs.writeFileSync(owned, "PATH=/home/attacker/bin\n");
    fs.chownSync(owned, 4242, 4242);
    const r2 = cli(["daemon", "-c", envConfig(dir, owned)]);
    assert.equal(r2.code, 2, r2.stderr);
    assert.match(r2.stderr, /owned\.env is owned by uid 4242/);
    assert.doesNotMatch(r1.stderr + r2.stderr, /s3cret|attacker/);
  },
);

test(
  "root: an env_file that turns into a FIFO, /proc/self/environ or /etc/shadow-like text fails its run alone, quoting nothing",
  needs(notRoot),
  async (t) => {
    const dir = tmpdir(t);
    const envFile = path.join(dir, "job.env");
    fs.writeFileSync(envFile, "A=1\n");
    const ran = path.join(dir, "ran");
    const cfg = envConfig(
      dir,
      envFile,
      ["  other:", '    schedule: "* * * * * *"', `    command: echo x >> ${ran}`].join("\n"),
    );
    const stateDir = path.join(dir, ".cronvisor");
    const d = startDaemon(t, cfg, { CVX_CANARY: "daemon-secret-canary" });
    await waitFor(() => fs.existsSync(ran), "the other job runs");
    const attempts = [
      ["fifo", () => spawnSync("mkfifo", [envFile]).status === 0, /not a regular file/],
      [
        "shadow",
        () => fs.writeFileSync(envFile, "root:$6$salt$hash:19000:0:99999:7:::\n"),
        /job\.env:1: expected KEY=value/,
      ],
    ];
    for (const [what, make, reason] of attempts) {
      fs.rmSync(envFile, { force: true });
      make();
      const r = cli(["run", "victim", "-c", cfg]);
      assert.notEqual(r.code, 0, what);
      const row = readStore(stateDir).runs({ job: "victim" }).at(-1);
      assert.equal(row.status, "spawn_failed", what);
      assert.match(row.reason, reason, what);
      assert.doesNotMatch(row.reason, /\$6\$|daemon-secret-canary/, what);
    }
    // The daemon kept serving the other job throughout (a FIFO never froze it).
    const before = fs.readFileSync(ran, "utf8").length;
    await waitFor(() => fs.readFileSync(ran, "utf8").length > before, "the other job still runs");
    assert.equal(d.exitCode, null, d.err);
  },
);

test(
  "a user: job cannot write or forge its own exit status: the wrapper that writes it runs as root, outside setpriv",
  // Skipped only when not root: a user: job needs a second user; in CI, which runs as root, never.
  needs(process.getuid() !== 0 && "needs root"),
  async (t) => {
    const dir = tmpdir(t, "cvx-forge-");
    fs.chmodSync(dir, 0o755);
    const exitFile = path.join(dir, "runs", "1.exit");
    // The job tries to write the status the daemon would read (0), and to look into the
    // directory; it exits 3.
    const handle = await startRun({
      job: "j",
      runId: 1,
      command: `{ echo 0 > "$EXITF"; } 2>/dev/null && echo wrote; ls "$(dirname "$EXITF")" >/dev/null 2>&1 && echo listed; exit 3`,
      shell: "/bin/sh",
      cwd: "/",
      env: { PATH: "/usr/bin:/bin", EXITF: exitFile },
      user: "nobody",
      logPath: path.join(dir, "logs", "j", "1.log"),
      logMaxBytes: 1 << 20,
      timeoutMs: null,
      killGraceMs: 5000,
      exitFile,
      pidFile: path.join(dir, "runs", "1.pid"),
      leftovers: "kill",
      nofile: null,
    });
    const r = await handle.done;
    assert.deepEqual([r.status, r.exitCode], ["failed", 3]);
    assert.equal(fs.readFileSync(path.join(dir, "logs", "j", "1.log"), "utf8"), "");
    assert.equal(fs.readFileSync(exitFile, "utf8"), "3\n", "the real status, written by root");
  },
);

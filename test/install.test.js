// The server install (issue 37), as docs/install.md gives it, in a throwaway prefix and root:
// `npm pack`, examples/install-server.sh (npm install -g of the tarball, the config, the unit,
// validate), then the installed command runs a job with the clone out of the picture. What a
// container-less machine cannot do is systemd starting it: the unit is checked by
// `systemd-analyze verify` where that is installed, and its daemon's behaviour in
// systemd-unit.test.js.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { ROOT, cleanEnv, tmpdir } from "./helpers.js";
import { needsNow } from "./needs.js";

const sh = (cmd, args, opts = {}) =>
  spawnSync(cmd, args, {
    encoding: "utf8",
    env: cleanEnv(opts.env),
    cwd: opts.cwd ?? "/",
    ...opts,
  });

/** A unit file's [Service] settings, each key's last value. */
function serviceOf(file) {
  const out = {};
  let section = null;
  for (const line of fs.readFileSync(file, "utf8").split("\n")) {
    const head = /^\[(.+)\]$/.exec(line);
    if (head) section = head[1];
    else if (section === "Service" && /^[A-Za-z]+=/.test(line))
      out[line.slice(0, line.indexOf("="))] = line.slice(line.indexOf("=") + 1);
  }
  return out;
}

const stateDirOf = (yaml) => /^state_dir: (.+)$/m.exec(yaml)?.[1];

test("the shipped unit and server config agree: state in /var/lib/cronvisor, the unit's StateDirectory=", () => {
  const svc = serviceOf(path.join(ROOT, "examples", "cronvisor.service"));
  assert.equal(svc.StateDirectory, "cronvisor");
  assert.equal(svc.StateDirectoryMode, "0700");
  assert.equal(svc.ExecStart, "/usr/local/bin/cronvisor daemon -c /etc/cronvisor/jobs.yaml");
  const yaml = fs.readFileSync(path.join(ROOT, "examples", "jobs.server.yaml"), "utf8");
  assert.equal(stateDirOf(yaml), `/var/lib/${svc.StateDirectory}`);
});

test("npm pack, then install-server.sh into a throwaway prefix and root: a copy that runs without the clone, its unit and config agreeing", (t) => {
  const dir = tmpdir(t, "cvx-install-");
  const pack = sh("npm", ["pack", "--ignore-scripts", "--pack-destination", dir], { cwd: ROOT });
  assert.equal(pack.status, 0, pack.stderr);
  const tgz = path.join(dir, pack.stdout.trim().split("\n").pop());
  const listed = sh("tar", ["tzf", tgz]).stdout.split("\n");
  for (const f of [
    "package/bin/cronvisor",
    "package/dist/bundle/cli-fast.cjs",
    "package/examples/cronvisor.service",
    "package/examples/jobs.server.yaml",
    "package/examples/install-server.sh",
  ])
    assert.ok(listed.includes(f), `${f} in the tarball`);
  assert.ok(!listed.some((f) => /^package\/(src|test)\//.test(f)), "no sources or tests packed");

  const prefix = path.join(dir, "usr", "local");
  const etc = path.join(dir, "etc");
  const state = path.join(dir, "var", "lib", "cronvisor");
  // --ignore-scripts: better-sqlite3 is not compiled again here (a minute of CPU); its build is
  // copied from the clone below. --prefer-offline: npm's cache first, the registry otherwise.
  const env = {
    PREFIX: prefix,
    ETC: etc,
    STATE: state,
    NPM_FLAGS: "--prefer-offline --ignore-scripts",
  };
  const install = sh("sh", [path.join(ROOT, "examples", "install-server.sh"), tgz], { env });
  const offline =
    install.status !== 0 && /ENOTCACHED|ENOTFOUND|EAI_AGAIN|ECONNREFUSED/.test(install.stderr);
  const why = `npm cannot reach its registry nor find the packages in its cache: ${install.stderr.split("\n")[0]}`;
  if (needsNow(t, offline && why)) return;
  assert.equal(install.status, 0, install.stdout + install.stderr);
  assert.match(install.stdout, /: ok, 1 job\(s\)\n/, "validate ran on the config");
  assert.match(install.stdout, /systemctl daemon-reload && systemctl enable --now cronvisor/);

  // A copy, not a link into the clone; the command is PREFIX/bin/cronvisor.
  const pkg = path.join(prefix, "lib", "node_modules", "cronvisor");
  assert.ok(fs.lstatSync(pkg).isDirectory() && !fs.lstatSync(pkg).isSymbolicLink());
  const bin = path.join(prefix, "bin", "cronvisor");
  assert.equal(fs.realpathSync(bin), path.join(pkg, "bin", "cronvisor"));
  const release = path.join(pkg, "node_modules", "better-sqlite3", "build", "Release");
  fs.mkdirSync(release, { recursive: true });
  fs.copyFileSync(
    path.join(ROOT, "node_modules", "better-sqlite3", "build", "Release", "better_sqlite3.node"),
    path.join(release, "better_sqlite3.node"),
  );

  // The config: the server example, its state dir the unit's StateDirectory=.
  const cfg = path.join(etc, "cronvisor", "jobs.yaml");
  assert.equal(stateDirOf(fs.readFileSync(cfg, "utf8")), state);
  const unit = path.join(etc, "systemd", "system", "cronvisor.service");
  const svc = serviceOf(unit);
  assert.equal(svc.ExecStart, `${bin} daemon -c ${cfg}`, "the unit runs this install");
  assert.equal(path.join(dir, "var", "lib", svc.StateDirectory), state);
  if (fs.existsSync("/usr/bin/systemd-analyze")) {
    const verify = sh("systemd-analyze", ["verify", unit]);
    assert.equal(verify.status, 0, verify.stderr);
    assert.doesNotMatch(verify.stderr, /cronvisor\.service/, verify.stderr);
  }

  // The installed command runs a job, its state where the config says, from anywhere.
  const run = sh(bin, ["run", "hello", "-c", cfg], { cwd: dir });
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout, "hello from cronvisor\n");
  assert.ok(fs.existsSync(path.join(state, "cronvisor.db")), "the store in the state dir");
  const status = sh(bin, ["status", "--json", "-c", cfg]);
  assert.equal(JSON.parse(status.stdout).jobs[0].last_run.status, "ok");
  // Nothing of the install resolves into the clone.
  const walk = (p) => {
    const st = fs.lstatSync(p);
    if (st.isSymbolicLink())
      assert.ok(!fs.realpathSync(p).startsWith(`${ROOT}/`), `${p} points into the clone`);
    else if (st.isDirectory()) for (const e of fs.readdirSync(p)) walk(path.join(p, e));
  };
  walk(prefix);

  // Again: the config someone edited is kept; unit and package are rewritten.
  fs.appendFileSync(cfg, "# edited\n");
  const again = sh("sh", [path.join(ROOT, "examples", "install-server.sh"), tgz], { env });
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, new RegExp(`keeping ${cfg}`));
  assert.match(fs.readFileSync(cfg, "utf8"), /# edited\n$/);
});

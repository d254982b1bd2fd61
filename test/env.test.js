// A job's environment: the minimal base, the layers in order, env_file parsing and its errors,
// the run-as user's identity, /etc/passwd lookups.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { lookupUser, parsePasswd } from "../dist/core/passwd.js";
import { buildJobEnv, parseEnvFile, readEnvFile } from "../dist/run/env.js";
import { tmpdir } from "./helpers.js";

const DAEMON_ENV = {
  PATH: "/opt/daemon/bin:/usr/bin",
  HOME: "/root",
  USER: "root",
  LOGNAME: "root",
  SHELL: "/bin/bash",
  LANG: "C.UTF-8",
  TZ: "Europe/Berlin",
  AWS_SECRET_ACCESS_KEY: "do-not-leak",
  CRONVISOR_CONFIG: "/etc/cronvisor/jobs.yaml",
  NODE_OPTIONS: "--inspect",
};

const input = (over = {}) => ({
  base: DAEMON_ENV,
  configEnv: {},
  envFileText: null,
  envFilePath: null,
  cronvisor: {},
  user: null,
  ...over,
});

test("the base is the seven allowed variables of the daemon and nothing else", () => {
  assert.deepEqual(buildJobEnv(input()), {
    PATH: "/opt/daemon/bin:/usr/bin",
    HOME: "/root",
    USER: "root",
    LOGNAME: "root",
    SHELL: "/bin/bash",
    LANG: "C.UTF-8",
    TZ: "Europe/Berlin",
  });
});

test("PATH defaults when the daemon has none; absent base variables stay absent", () => {
  assert.deepEqual(buildJobEnv(input({ base: { HOME: "/root" } })), {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: "/root",
  });
});

test("layers: base, then config env, then env_file, then CRONVISOR_* which nothing overrides", () => {
  const env = buildJobEnv(
    input({
      configEnv: { MODE: "config", PATH: "/srv/bin", ONLY_CONFIG: "1", CRONVISOR_JOB: "fake" },
      envFileText: "MODE=file\nONLY_FILE=2\nCRONVISOR_FENCE=999\n",
      envFilePath: "/etc/cronvisor/x.env",
      cronvisor: { CRONVISOR_JOB: "backup", CRONVISOR_FENCE: "7" },
    }),
  );
  assert.equal(env.PATH, "/srv/bin");
  assert.equal(env.MODE, "file");
  assert.equal(env.ONLY_CONFIG, "1");
  assert.equal(env.ONLY_FILE, "2");
  assert.equal(env.CRONVISOR_JOB, "backup");
  assert.equal(env.CRONVISOR_FENCE, "7");
  assert.equal(env.AWS_SECRET_ACCESS_KEY, undefined);
});

test("running as another user: HOME, USER, LOGNAME and SHELL are that user's", () => {
  const user = { name: "app", home: "/srv/app", shell: "/bin/sh" };
  const env = buildJobEnv(input({ user }));
  assert.deepEqual(
    [env.HOME, env.USER, env.LOGNAME, env.SHELL, env.PATH],
    ["/srv/app", "app", "app", "/bin/sh", DAEMON_ENV.PATH],
  );
  // The config can still say otherwise, explicitly.
  assert.equal(buildJobEnv(input({ user, configEnv: { HOME: "/data" } })).HOME, "/data");
});

test("env_file syntax: comments, blanks, export, quotes, escapes, inline comments", () => {
  const text = [
    "# a comment",
    "",
    "   ",
    "PLAIN=value",
    "  SPACED = padded value  ",
    "export EXPORTED=yes",
    "EMPTY=",
    "EQUALS=a=b=c",
    "HASH=pass#word",
    "INLINE=value # a comment",
    "SINGLE='$HOME \\n # literal'",
    "SINGLE2='keep \"double\" and \\\\ as is'",
    'DOUBLE="line1\\nline2 \\"q\\" \\\\ \\$HOME $HOME"',
    'DOUBLE_HASH="a # not a comment" # but this is',
    "CRLF=windows\r",
    "",
  ].join("\n");
  assert.deepEqual(parseEnvFile(text, "x.env"), {
    PLAIN: "value",
    SPACED: "padded value",
    EXPORTED: "yes",
    EMPTY: "",
    EQUALS: "a=b=c",
    HASH: "pass#word",
    INLINE: "value",
    SINGLE: "$HOME \\n # literal",
    SINGLE2: 'keep "double" and \\\\ as is',
    DOUBLE: 'line1\nline2 "q" \\ $HOME $HOME',
    DOUBLE_HASH: "a # not a comment",
    CRLF: "windows",
  });
});

test("env_file errors name FILE:LINE and never quote the file's content", () => {
  // The file may be a secret (or /etc/shadow, if a path was wrong): its text never reaches a
  // run's reason, history, alerts or /status.
  const bad = [
    ["OK=1\nno equals sign\n", "f.env:2: expected KEY=value"],
    ["1ABC=x", "f.env:1: invalid variable name"],
    ["MY-VAR=x", "f.env:1: invalid variable name"],
    ["=x", "f.env:1: invalid variable name"],
    ['\n\nA="unterminated', 'f.env:3: unterminated " quote'],
    ["A='open", "f.env:1: unterminated ' quote"],
    ['A="x" trailing', "f.env:1: unexpected text after the closing quote"],
    ["root:$6$salt$hash:19000:0:99999:7:::\n", "f.env:1: expected KEY=value"],
  ];
  for (const [text, message] of bad) {
    assert.throws(() => parseEnvFile(text, "f.env"), { message }, JSON.stringify(text));
  }
  // Through buildJobEnv the path given is the one named.
  assert.throws(
    () =>
      buildJobEnv(input({ envFileText: "OK=1\n\nbad line", envFilePath: "/etc/cronvisor/a.env" })),
    { message: /^\/etc\/cronvisor\/a\.env:3: / },
  );
});

test("an 'export' key and a single quote inside a double-quoted value are fine", () => {
  assert.deepEqual(parseEnvFile('export=1\nQ="it\'s"\n', "f"), { export: "1", Q: "it's" });
});

test("readEnvFile reads the file, or names it in the error", (t) => {
  const dir = tmpdir(t, "cvx-env-");
  const file = path.join(dir, "job.env");
  fs.writeFileSync(file, "A=1\n");
  assert.equal(readEnvFile(file), "A=1\n");
  const missing = path.join(dir, "missing.env");
  assert.throws(() => readEnvFile(missing), {
    message: `env_file ${missing}: cannot read: ENOENT`,
  });
});

test("readEnvFile opens only a regular file it trusts, never a link, a FIFO, a NUL or a huge file", (t) => {
  const dir = tmpdir(t, "cvx-env-");
  const secret = path.join(dir, "secret");
  fs.writeFileSync(secret, "TOKEN=root-only\n", { mode: 0o600 });
  const link = path.join(dir, "link.env");
  fs.symlinkSync(secret, link);
  assert.throws(() => readEnvFile(link), {
    message: `env_file ${link}: is a symbolic link; name the file itself`,
  });
  const fifo = path.join(dir, "fifo.env");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
  // Opened without blocking (nobody writes the FIFO) and refused.
  assert.throws(() => readEnvFile(fifo), { message: `env_file ${fifo}: not a regular file` });
  const nul = path.join(dir, "nul.env");
  fs.writeFileSync(nul, "A=1\nB=secret\0C=2\n");
  assert.throws(() => readEnvFile(nul), {
    message: `env_file ${nul}: a NUL byte on line 2; not an env file`,
  });
  const big = path.join(dir, "big.env");
  fs.writeFileSync(big, `A=${"x".repeat(70 * 1024)}\n`);
  assert.throws(() => readEnvFile(big), { message: `env_file ${big}: larger than 64 KiB` });
  const open = path.join(dir, "open.env");
  fs.writeFileSync(open, "A=1\n");
  fs.chmodSync(open, 0o666);
  assert.throws(() => readEnvFile(open), {
    message: `env_file ${open}: writable by group or others (mode 666); chmod go-w it`,
  });
  const theirs = path.join(dir, "theirs.env");
  fs.writeFileSync(theirs, "A=1\n", { mode: 0o644 });
  if (process.getuid() === 0) {
    fs.chownSync(theirs, 4242, 4242);
    assert.throws(() => readEnvFile(theirs), {
      message: `env_file ${theirs}: owned by uid 4242, who may not set this job's environment; chown root it`,
    });
    // The job's own user may own its env_file.
    assert.equal(readEnvFile(theirs, new Set([0, 4242])), "A=1\n");
  }
});

test("parsePasswd finds a user by name or numeric uid", () => {
  const passwd = [
    "root:x:0:0:root:/root:/bin/bash",
    "# comment:x:1:1:::",
    "broken:x:notanumber:1::/nowhere:/bin/sh",
    "app:x:1001:1002:App,,,:/srv/app:",
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin",
  ].join("\n");
  assert.deepEqual(parsePasswd(passwd, "app"), {
    name: "app",
    uid: 1001,
    gid: 1002,
    home: "/srv/app",
    shell: "/bin/sh", // empty in passwd means /bin/sh
  });
  assert.equal(parsePasswd(passwd, "65534")?.name, "nobody");
  assert.equal(parsePasswd(passwd, "broken"), null);
  assert.equal(parsePasswd(passwd, "ghost"), null);
});

test("lookupUser reads the real /etc/passwd", () => {
  assert.deepEqual(lookupUser("root"), { ...lookupUser("0"), name: "root" });
  assert.equal(lookupUser("root")?.uid, 0);
  assert.equal(lookupUser("no-such-user-cvx"), null);
});

// A state dir that does not exist yet, under a sticky directory another user can write (issue 13,
// as the security review found it): the path check stops at the first missing component, so the
// user may plant a link there between the check and the mkdir and have the root daemon create its
// store and logs inside their own directory. cronvisor creates each missing component itself, one
// at a time, and checks each at once: a link or a directory of someone else's found there is
// refused (exit 2, naming the path), and nothing is ever created through it.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import {
  cli,
  killDaemon,
  runAs,
  spawnCli,
  testUser,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needs } from "./needs.js";

// The attacker is a second user: skipped, with testUser's reason, only when not root or where
// root cannot create that user; in CI, which runs as root, never.
const user = testUser();
const skip = user.skip ?? false;
const STACK = /\n\s+at /;

/**
 * A fresh sticky 1777 directory (as /tmp) and, inside it, the attacker's own directory `att`
 * with an empty `fake` in it: where a planted link would send the daemon.
 */
function stickyDirs(t) {
  const base = tmpdir(t, "cvx-sticky-");
  fs.chmodSync(base, 0o1777);
  const att = path.join(base, "att");
  const fake = path.join(att, "fake");
  assert.equal(runAs(user, ["mkdir", "-m", "0755", att, fake]).code, 0);
  return { base, att, fake };
}

/** What the attacker got: the entries of their directory (empty when the daemon never came). */
const gotInto = (fake) => fs.readdirSync(fake);

/**
 * The attacker, as the throwaway user: plant `link` -> `target` and remove it again, as fast as
 * it can; when a `s` shows up in the target (it won), keep the link so the daemon goes on writing
 * there. Prints how many times it flipped the link when stopped.
 */
const RACER = `
const fs = require("node:fs");
const [link, target] = process.argv.slice(1);
let flips = 0, stop = false;
process.on("SIGTERM", () => (stop = true));
function burst() {
  for (let i = 0; i < 2000 && !stop; i++) {
    try { fs.symlinkSync(target, link); } catch {}
    if (fs.existsSync(target + "/s")) continue;
    try { fs.unlinkSync(link); flips++; } catch {}
  }
  if (stop) return process.stdout.write(JSON.stringify({ flips }) + "\\n", () => process.exit(0));
  setImmediate(burst);
}
process.stdout.write("ready\\n");
burst();
`;

function startRacer(link, target) {
  const child = spawn(
    "setpriv",
    [
      `--reuid=${user.uid}`,
      `--regid=${user.gid}`,
      "--clear-groups",
      "--",
      process.execPath,
      "-e",
      RACER,
      link,
      target,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  child.out = "";
  child.stdout.on("data", (d) => (child.out += d));
  child.stderr.on("data", (d) => (child.out += d));
  // 'close', not 'exit': its flip count is written in its SIGTERM handler just before it
  // exits, and 'exit' can come before that last line has been read from the pipe.
  child.exited = new Promise((resolve) => child.on("close", resolve));
  return child;
}

/** A refusal as the CLI prints it: exit 2, naming `p`, each line a path's problem, no stack. */
function assertRefusal(r, p, what) {
  assert.equal(r.code, 2, `${what}: exit ${r.code}\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, STACK, what);
  assert.ok(r.stderr.includes(p), `${what}: names ${p}:\n${r.stderr}`);
  const [head, ...rest] = r.stderr.trim().split("\n");
  assert.match(head, /^refusing to run as root:/, what);
  for (const line of rest) assert.match(line, /^ {2}\//, `${what}: ${line}`);
}

test(
  "root: a link raced in at the missing parent of a sticky-dir state dir never gets the store (run, daemon)",
  needs(skip),
  async (t) => {
    // Daemons are killed before the dirs are removed (after hooks run in the order they were
    // added), also when the test fails half-way.
    const daemons = [];
    let racer = null;
    t.after(async () => {
      racer?.kill("SIGKILL");
      await Promise.all(daemons.map(killDaemon));
    });
    const { base, fake } = stickyDirs(t);
    const race = path.join(base, "race");
    const stateDir = path.join(race, "s");
    const cfgDir = tmpdir(t);
    const cfg = writeConfig(
      cfgDir,
      `state_dir: ${stateDir}\nheartbeat: 1s\njobs:\n  j:\n    schedule: "@daily"\n    command: "true"\n`,
    );
    racer = startRacer(race, fake);
    await waitFor(() => racer.out.includes("ready"), "the attacker starts");
    const outcomes = { ok: 0, refused: 0, why: {} };
    const lost = [];
    /** One attempt's outcome, checked; then a clean start for the next one. */
    const judge = (r, what) => {
      const got = gotInto(fake);
      if (got.length > 0) lost.push(`${what}: exit ${r.code}, made ${got.join(" ")} in ${fake}`);
      else if (r.code === 0) {
        const st = fs.lstatSync(race);
        assert.ok(st.isDirectory() && st.uid === 0, `${what}: ${race} is root's directory`);
        assert.equal(st.mode & 0o777, 0o700, `${what}: ${race} is 0700`);
        assert.ok(
          fs.existsSync(path.join(stateDir, "cronvisor.db")),
          `${what}: the store is there`,
        );
        outcomes.ok++;
      } else {
        assertRefusal(r, race, what);
        outcomes.refused++;
        // Where the link was caught: by the path check, or on the way down (found, or there
        // just as cronvisor made the component: the window a recursive mkdir left open).
        const why = /made by someone else/.test(r.stderr)
          ? "at mkdir"
          : /is a symbolic link owned/.test(r.stderr)
            ? "on the way"
            : "by the check";
        outcomes.why[why] = (outcomes.why[why] ?? 0) + 1;
      }
      for (const e of got) fs.rmSync(path.join(fake, e), { recursive: true, force: true });
      fs.rmSync(race, { recursive: true, force: true });
    };
    /** A daemon that starts (then stopped with SIGTERM) or refuses: its exit and what it said. */
    const daemon = async (what) => {
      const d = spawnCli(["daemon", "-c", cfg]);
      daemons.push(d);
      await waitFor(() => d.exitCode !== null || d.err.includes("started with"), what);
      if (d.exitCode === null) d.kill("SIGTERM");
      const { code } = await d.exited;
      return { code, stderr: d.err };
    };
    // A daemon, then two `run`s, over and over, for 20 s (at least two rounds, at most eight):
    // each one a fresh first creation of the state dir while the link flips.
    const started = Date.now();
    const tried = { run: 0, daemon: 0 };
    for (let round = 1; round <= 8; round++) {
      if (round > 2 && Date.now() - started > 20_000) break;
      judge(await daemon(`daemon ${round}`), `daemon ${++tried.daemon}`);
      for (let i = 0; i < 2; i++) judge(cli(["run", "j", "-c", cfg]), `run ${++tried.run}`);
    }
    racer.kill("SIGTERM");
    await racer.exited;
    t.diagnostic(
      `${tried.run} runs and ${tried.daemon} daemons in ${Date.now() - started} ms: ` +
        `${outcomes.ok} made the state dir, ${outcomes.refused} refused ` +
        `(${JSON.stringify(outcomes.why)}), ${lost.length} lost to the attacker; ` +
        `the attacker: ${racer.out.trim().split("\n").pop()}`,
    );
    assert.deepEqual(lost, [], "nothing is ever created inside the attacker's directory");
  },
);

test(
  "root: makeDirs refuses a link or someone else's directory found at a missing component (planted after the check)",
  needs(skip),
  async (t) => {
    const { daemonTrust, makeDirs } = await import("../dist/core/safe-path.js");
    const { base, att, fake } = stickyDirs(t);
    const trust = daemonTrust();
    // A link planted at the missing intermediate component `a`, as between the check and the mkdir.
    const a = path.join(base, "a");
    assert.equal(runAs(user, ["ln", "-s", fake, a]).code, 0);
    const viaLink = makeDirs(path.join(a, "b", "s"), trust);
    assert.equal(viaLink.length, 1, viaLink.join("\n"));
    assert.match(viaLink[0], new RegExp(`^${a} is a symbolic link`));
    assert.deepEqual(gotInto(fake), [], "nothing made through the link");
    // A directory of the attacker's at a missing component.
    const c = path.join(base, "c");
    assert.equal(runAs(user, ["mkdir", c]).code, 0);
    const theirs = makeDirs(path.join(c, "s"), trust);
    assert.match(theirs.join("\n"), new RegExp(`^${c} is owned by uid ${user.uid}`));
    assert.deepEqual(fs.readdirSync(c), [], "nothing made in their directory");
    // A directory made by root a moment before (another cronvisor making the same path): used.
    const d = path.join(base, "d");
    fs.mkdirSync(d, { mode: 0o700 });
    assert.deepEqual(makeDirs(path.join(d, "e", "s"), trust), []);
    // Every component made is root's, 0700, a real directory.
    for (const p of [path.join(d, "e"), path.join(d, "e", "s")]) {
      const st = fs.lstatSync(p);
      assert.ok(st.isDirectory() && st.uid === 0, p);
      assert.equal(st.mode & 0o777, 0o700, p);
    }
    // Made already: nothing to do, no problem.
    assert.deepEqual(makeDirs(path.join(d, "e", "s"), trust), []);
    assert.deepEqual(fs.readdirSync(att), ["fake"]);
  },
);

test(
  "root: a link already at the missing parent is refused by run and daemon, exit 2, naming it; without it both parts are made 0700",
  needs(skip),
  (t) => {
    const { base, fake } = stickyDirs(t);
    const race = path.join(base, "race");
    assert.equal(runAs(user, ["ln", "-s", fake, race]).code, 0);
    const cfg = writeConfig(
      tmpdir(t),
      `state_dir: ${race}/s\njobs:\n  j:\n    schedule: "@daily"\n    command: "true"\n`,
    );
    for (const args of [["run", "j"], ["daemon"]]) {
      assertRefusal(cli([...args, "-c", cfg]), race, args[0]);
      assert.deepEqual(gotInto(fake), [], args[0]);
    }
    // Without the link, the same run makes both missing components: root's, 0700, real dirs.
    fs.rmSync(race);
    const r = cli(["run", "j", "-c", cfg]);
    assert.equal(r.code, 0, r.stderr);
    for (const p of [race, path.join(race, "s")]) {
      const st = fs.lstatSync(p);
      assert.ok(st.isDirectory() && st.uid === 0, p);
      assert.equal(st.mode & 0o777, 0o700, p);
    }
    assert.ok(fs.existsSync(path.join(race, "s", "cronvisor.db")));
  },
);

// The import-crontab parts one by one (src/crontab/*): each is pure, text in and values out, so
// each is checked here without a whole crontab. crontab.test.js checks the whole import.
import { test } from "node:test";
import assert from "node:assert/strict";
import { convertFields } from "../dist/crontab/fields.js";
import { classifyLine, cutCommand, detectFormat } from "../dist/crontab/lines.js";
import { nameFor, uniqueName } from "../dist/crontab/names.js";
import { splitPercent, tokenize, withStdin } from "../dist/crontab/shell.js";
import { jobVariables, parseEnvLine, takeVariable } from "../dist/crontab/variables.js";
import { lockName, unwrap, wrapperKeys } from "../dist/crontab/wrappers.js";

test("fields: kept as written when croner agrees, else written out; cron's day AND becomes +", () => {
  const kept = convertFields(["*/15", "8-18/2", "*", "jan-mar", "mon-fri"]);
  assert.equal(kept.pattern, "*/15 8-18/2 * jan-mar mon-fri");
  assert.deepEqual(kept.notes, []);
  assert.equal(kept.fixedTime, false);

  const big = convertFields(["*/90", "0", "*", "*", "*"]);
  assert.equal(big.pattern, "0 0 * * *");
  assert.deepEqual(big.notes, ['schedule written out as "0 0 * * *" for croner']);
  assert.equal(big.fixedTime, true);

  const and = convertFields(["0", "0", "*/2", "*", "1"]);
  assert.equal(and.pattern, "0 0 */2 * +1");
  assert.match(and.notes[0], /both day fields have to match/);

  assert.equal(convertFields(["0", "0", "30", "2", "*"]).never, true);
  assert.throws(() => convertFields(["0", "0", "L", "*", "*"]), {
    message: 'bad day-of-month "L": "L": L, W, # and ? are not crontab syntax',
  });
  assert.throws(() => convertFields(["0", "0", "*", "*", "monday"]), {
    message:
      'bad day-of-week "monday": unknown name "monday" (cron takes the first three letters only)',
  });
});

test("variables: NAME=value as cron's env.c reads it", () => {
  assert.deepEqual(parseEnvLine("A = b  "), { name: "A", value: "b" });
  assert.deepEqual(parseEnvLine("'A B'=c"), { name: "A B", value: "c" });
  assert.deepEqual(parseEnvLine('A="b c" '), { name: "A", value: "b c" });
  assert.deepEqual(parseEnvLine("MAILTO="), { name: "MAILTO", value: "" });
  assert.equal(parseEnvLine("x y=z"), null);

  const env = new Map();
  const warnings = [];
  const all = () => true;
  assert.match(
    takeVariable({ line: 1, name: "TZ", value: "Nowhere/X" }, env, all, warnings),
    /^TZ=Nowhere\/X is not a time zone/,
  );
  assert.equal(takeVariable({ line: 2, name: "A B", value: "c" }, env, all, warnings), null);
  assert.equal(takeVariable({ line: 3, name: "P", value: "$HOME/bin" }, env, all, warnings), null);
  assert.deepEqual(warnings, [
    'line 2: "A B" cannot be an env: name in cronvisor (letters, digits and _); not imported',
    'line 3: cron does not expand variables in "P=$HOME/bin"; the value is copied as written',
  ]);
  assert.deepEqual([...env], [["P", { value: "$HOME/bin", line: 3 }]]);
});

test("variables: what differs from the first job's variables goes to the job", () => {
  const globalEnv = new Map([["SHELL", { value: "/bin/sh", line: 1 }]]);
  const env = new Map([
    ["SHELL", { value: "/bin/bash", line: 4 }],
    ["HOME", { value: "/srv", line: 5 }],
    ["RANDOM_DELAY", { value: "5", line: 6 }],
  ]);
  const notes = [];
  const vars = jobVariables("x", env, globalEnv, () => true, notes, []);
  assert.deepEqual(vars, {
    command: ["/bin/bash", "-c", "x"],
    env: { SHELL: "/bin/bash", HOME: "/srv", RANDOM_DELAY: "5" },
    cwd: "/srv",
    timezone: null,
    jitterMs: 300_000,
  });
  assert.equal(notes.length, 2);
  assert.match(notes[0], /^SHELL=\/bin\/bash from line 4: run as an argv list/);
});

test("shell: the command is cut at the first unescaped %, the rest is stdin", () => {
  assert.deepEqual(splitPercent("cmd %a%b\\%c"), { command: "cmd ", stdin: "a\nb%c\n" });
  assert.deepEqual(splitPercent("date +\\%F"), { command: "date +%F", stdin: null });
  assert.deepEqual(splitPercent("x %"), { command: "x ", stdin: null });
  assert.equal(tokenize("echo 'x").complete, false);
  assert.equal(withStdin("cat", "a\nb\n"), "printf '%s\\n' 'a' 'b' | cat");
  assert.equal(withStdin("a; b", "x"), "printf '%s' 'x' | {\na; b\n}");
});

test("wrappers: flock -n, timeout and chronic are removed in any order and become keys", () => {
  const u = unwrap("flock -n /tmp/l timeout -k 10 5m chronic /x --y", new Map(), 1);
  assert.equal(u.command, "/x --y");
  assert.deepEqual(
    u.layers.map((l) => l.text),
    ["flock -n /tmp/l", "timeout -k 10 5m", "chronic"],
  );
  const notes = [];
  assert.deepEqual(wrapperKeys(u.layers, notes), {
    overlap: "skip",
    locks: [],
    timeoutMs: 300_000,
    killGraceMs: 10_000,
  });
  assert.equal(notes.length, 3);

  const list = unwrap("flock -n /tmp/l a; b", new Map(), 1);
  assert.equal(list.command, "flock -n /tmp/l a; b");
  assert.deepEqual(list.kept, [
    "kept `flock -n /tmp/l`: it locks only the first command of the line",
  ]);
  // A file line 3 locks too becomes the named lock both hold, blocking (-w too) or not.
  const mirror = new Map([["/tmp/l", { lines: [1, 3], name: "l" }]]);
  for (const [line, wait] of [
    ["flock -n /tmp/l a", "no"],
    ["flock /tmp/l a", "yes"],
    ["flock -x -w 30 /tmp/l a", "timeout"],
  ]) {
    const shared = unwrap(line, mirror, 1);
    assert.equal(shared.command, "a");
    assert.deepEqual(shared.kept, []);
    assert.deepEqual(
      shared.layers.map((l) => [l.kind, l.name, l.wait]),
      [["flock", "l", wait]],
    );
    const sharedNotes = [];
    const keys = wrapperKeys(shared.layers, sharedNotes);
    assert.deepEqual([keys.locks, keys.overlap], [["l"], wait === "no" ? "skip" : "queue"]);
    assert.match(sharedNotes[0], /other lines lock \/tmp\/l too: `locks: \[l\]`/);
  }
  // Without another line, a blocking flock stays: cronvisor's overlap skip would not wait.
  assert.deepEqual(unwrap("flock /tmp/l a", new Map(), 1).kept, [
    "kept `flock /tmp/l`: without -n it waits for the lock and then runs; cronvisor's nearest is overlap: queue",
  ]);
  assert.equal(lockName("/var/lock/DB backup.lock"), "db-backup");
  assert.equal(lockName("/run/.lock"), "lock");
});

test("names: from the program that does the work; unique and valid", () => {
  assert.equal(nameFor("cd /srv && ./backup.sh --full"), "backup");
  assert.equal(nameFor("python3 -m app.tasks"), "app.tasks");
  assert.equal(nameFor("php artisan schedule:run"), "artisan-schedule:run");
  const taken = new Set();
  assert.equal(uniqueName("Backup Job!", taken), "backup-job");
  assert.equal(uniqueName("backup-job", taken), "backup-job-2");
  assert.equal(uniqueName(null, taken), "job");
});

test("lines: kinds, the user column, and the format detected from column 6", () => {
  assert.deepEqual(classifyLine("  # hi", 1), { kind: "comment", line: 1, text: " hi" });
  assert.deepEqual(classifyLine("\r", 2), { kind: "blank", line: 2 });
  assert.match(classifyLine("@every 5m x", 3).message, /^unknown time specifier "@every"/);
  const entry = classifyLine("0 * * * * root /x %in", 4);
  assert.equal(entry.kind, "entry");
  assert.deepEqual(cutCommand(entry, true).job, {
    entry: entry.entry,
    user: "root",
    command: "/x",
    stdin: "in\n",
  });
  assert.deepEqual(detectFormat([entry.entry], { file: "x" }).format, {
    system: true,
    why: "every job line names a user in column 6 (root)",
  });
  assert.equal(
    detectFormat([entry.entry], { file: "/etc/cron.d/x" }).format.why,
    "the file is /etc/cron.d/x",
  );
});

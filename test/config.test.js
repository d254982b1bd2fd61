import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { loadConfig, parseConfig } from "../dist/config/config.js";
import { nextSlots as nextFireTimes } from "../dist/schedule/schedule.js";
import { formatConfigError } from "../dist/core/types.js";
import { ROOT, tmpdir, writeConfig } from "./helpers.js";

const FILE = "/srv/app/jobs.yaml";
const J = (...lines) => lines.join("\n") + "\n";
/** One job `a`, with these lines as its body. */
const job = (...lines) => J("jobs:", "  a:", ...lines.map((l) => "    " + l));
const ok = ['schedule: "@daily"', "command: x"];

function messages(text) {
  const { config, errors } = parseConfig(text, "jobs.yaml", { hostTimezone: "UTC" });
  return { config, lines: errors.map(formatConfigError) };
}

function valid(text, opts = { hostTimezone: "Europe/Berlin" }) {
  const { config, errors } = parseConfig(text, FILE, opts);
  assert.deepEqual(errors.map(formatConfigError), []);
  return config;
}

// The "bad input" corpus: each broken config and the exact lines `cronvisor validate` prints.
const CORPUS = [
  ["an empty file", "", ["jobs.yaml:1:1: (root): no jobs defined"]],
  [
    "a store URL with a password (never repeated in the message)",
    J(
      'store: "postgresql://app:s3cret@db:5432/cron"',
      "jobs:",
      "  a:",
      ...ok.map((l) => "    " + l),
    ),
    [
      "jobs.yaml:1:8: store: the URL holds a password: put it in password_file (0600), PGPASSWORD or ~/.pgpass, and write postgresql://USER@HOST:PORT/DB",
    ],
  ],
  [
    "a store that is not PostgreSQL",
    J("store: mysql://db/cron", "jobs:", "  a:", ...ok.map((l) => "    " + l)),
    ['jobs.yaml:1:8: store: expected postgresql://USER@HOST:PORT/DB, got "mysql://db/cron"'],
  ],
  [
    "a store URL without a database",
    J("store: postgresql://app@db:5432", "jobs:", "  a:", ...ok.map((l) => "    " + l)),
    ["jobs.yaml:1:8: store: no database named; expected postgresql://USER@HOST:PORT/DB"],
  ],
  [
    "password_file without store",
    J("password_file: /etc/cronvisor/pg", "jobs:", "  a:", ...ok.map((l) => "    " + l)),
    ["jobs.yaml:1:1: password_file: set, but there is no `store:` to use it with"],
  ],
  [
    "a node name with a space",
    J('node: "app 01"', "jobs:", "  a:", ...ok.map((l) => "    " + l)),
    [
      'jobs.yaml:1:7: node: expected a node name (1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit), got "app 01"',
    ],
  ],
  [
    "hosts: a bad name, a name twice, an empty list",
    J(
      "jobs:",
      "  a:",
      ...ok.map((l) => "    " + l),
      '    hosts: [app01, "-x", app01]',
      "  b:",
      ...ok.map((l) => "    " + l),
      "    hosts: []",
    ),
    [
      'jobs.yaml:5:20: jobs.a.hosts[1]: expected a node name, got "-x"',
      'jobs.yaml:5:26: jobs.a.hosts[2]: "app01" is listed twice',
      "jobs.yaml:9:12: jobs.b.hosts: an empty list names no node: leave hosts out to run the job on any node",
    ],
  ],
  ["a file of comments only", "# nothing\n", ["jobs.yaml:1:1: (root): no jobs defined"]],
  ["no jobs key", "timezone: UTC\n", ["jobs.yaml:1:1: (root): no jobs defined"]],
  ["an empty jobs key", "jobs:\n", ["jobs.yaml:1:1: jobs: no jobs defined"]],
  [
    "a list at the top",
    "- a\n",
    ['jobs.yaml:1:1: (root): expected a map of settings with "jobs:", got a list'],
  ],
  [
    "a word at the top",
    "hello\n",
    ['jobs.yaml:1:1: (root): expected a map of settings with "jobs:", got "hello"'],
  ],
  [
    "an unclosed quote",
    job('schedule: "@daily', "command: x"),
    ["jobs.yaml:3:15: jobs.a.schedule: this quote is never closed"],
  ],
  [
    "a tab as indentation",
    "jobs:\n\ta:\n",
    [
      "jobs.yaml:1:1: jobs: no jobs defined",
      "jobs.yaml:2:1: (root): tabs are not allowed as indentation; use spaces",
    ],
  ],
  [
    "a key out of line",
    J("jobs:", "  a:", '    schedule: "@daily"', "   command: x"),
    ["jobs.yaml:4:1: jobs: all mapping items must start at the same column"],
  ],
  [
    "two YAML documents",
    J("jobs: {}", "---", "jobs: {}"),
    ['jobs.yaml:2:1: (root): a config is one YAML document: remove the "---" line'],
  ],
  [
    "an unquoted * * * * * schedule",
    job("schedule: * * * * *", "command: x"),
    [
      'jobs.yaml:3:15: jobs.a.schedule: schedule "* * * * *" must be quoted: YAML reads a leading * as an alias',
    ],
  ],
  [
    "an unquoted */5 schedule with a comment",
    job("schedule: */5 * * * *  # every 5 minutes", "command: x"),
    [
      'jobs.yaml:3:15: jobs.a.schedule: schedule "*/5 * * * *" must be quoted: YAML reads a leading * as an alias',
    ],
  ],
  ["a duplicate key", job(...ok, "command: y"), ['jobs.yaml:5:5: jobs.a: duplicate key "command"']],
  [
    "a duplicate job",
    J(
      "jobs:",
      "  a:",
      '    schedule: "@daily"',
      "    command: x",
      "  a:",
      '    schedule: "@daily"',
      "    command: y",
    ),
    ['jobs.yaml:5:3: jobs: duplicate key "a"'],
  ],
  [
    "a misspelt key (and no separate missing-key error)",
    job('schedule: "@daily"', "comand: x"),
    ['jobs.yaml:4:5: jobs.a: unknown key "comand" (did you mean "command"?)'],
  ],
  [
    "an unknown key",
    job(...ok, "frobnicate: 1"),
    ['jobs.yaml:5:5: jobs.a: unknown key "frobnicate"'],
  ],
  [
    "a misspelt top-level key",
    J("timezon: UTC", "jobs: {}"),
    ['jobs.yaml:1:1: (root): unknown key "timezon" (did you mean "timezone"?)'],
  ],
  [
    "a job outside jobs:",
    J("backup:", '  schedule: "@daily"', "  command: x", "jobs: {}"),
    ['jobs.yaml:1:1: (root): unknown key "backup" (jobs go under "jobs:")'],
  ],
  [
    "a job setting at the top",
    J("timeout: 1h", "jobs: {}"),
    [
      'jobs.yaml:1:1: (root): unknown key "timeout" (it is a job setting: put it in a job or under "defaults:")',
    ],
  ],
  [
    "a top-level setting in a job",
    job(...ok, "heartbeat: 5s"),
    ['jobs.yaml:5:5: jobs.a: unknown key "heartbeat" (it is a top-level setting, not a job\'s)'],
  ],
  [
    "a schedule in defaults",
    J('defaults: { schedule: "@daily" }', "jobs: {}"),
    ['jobs.yaml:1:13: defaults: "schedule" cannot have a default: set it on each job'],
  ],
  [
    "a job without a command",
    job('schedule: "@daily"'),
    ['jobs.yaml:2:3: jobs.a: missing "command"'],
  ],
  [
    "a job without schedule and command",
    job("paused: false"),
    ['jobs.yaml:2:3: jobs.a: missing "schedule"', 'jobs.yaml:2:3: jobs.a: missing "command"'],
  ],
  [
    "an empty command string",
    job('schedule: "@daily"', 'command: ""'),
    ["jobs.yaml:4:14: jobs.a.command: command is empty"],
  ],
  [
    "a command with no value",
    job('schedule: "@daily"', "command:"),
    ["jobs.yaml:4:5: jobs.a.command: command is empty"],
  ],
  [
    "an empty argv list",
    job('schedule: "@daily"', "command: []"),
    ["jobs.yaml:4:14: jobs.a.command: command is empty"],
  ],
  [
    "a map in an argv list",
    job('schedule: "@daily"', "command: [echo, {a: 1}]"),
    ["jobs.yaml:4:21: jobs.a.command[1]: expected a string, got a map"],
  ],
  [
    "a number as command",
    job('schedule: "@daily"', "command: 5"),
    ["jobs.yaml:4:14: jobs.a.command: expected a command string or a list of arguments, got 5"],
  ],
  [
    "an empty program name in argv",
    job('schedule: "@daily"', 'command: ["", x]'),
    ["jobs.yaml:4:15: jobs.a.command[0]: the program name is empty"],
  ],
  [
    "a schedule with 4 fields",
    job('schedule: "* * * *"', "command: x"),
    [
      'jobs.yaml:3:15: jobs.a.schedule: schedule "* * * *" has 4 fields; use 5 (minute hour day month weekday) or 6 (second first)',
    ],
  ],
  [
    "a schedule with 7 fields",
    job('schedule: "0 0 0 * * * 2030"', "command: x"),
    [
      'jobs.yaml:3:15: jobs.a.schedule: schedule "0 0 0 * * * 2030" has 7 fields; use 5 (minute hour day month weekday) or 6 (second first)',
    ],
  ],
  [
    "minute 61",
    job('schedule: "61 * * * *"', "command: x"),
    ['jobs.yaml:3:15: jobs.a.schedule: schedule "61 * * * *": invalid value for minute: 61'],
  ],
  [
    "February 30th",
    job('schedule: "0 0 30 2 *"', "command: x"),
    ['jobs.yaml:3:15: jobs.a.schedule: schedule "0 0 30 2 *" never fires'],
  ],
  [
    "the same never-firing schedule in two jobs (each is reported)",
    J(
      "jobs:",
      "  a:",
      '    schedule: "0 0 30 2 *"',
      "    command: x",
      "  b:",
      '    schedule: "0 0 30 2 *"',
      "    command: y",
    ),
    [
      'jobs.yaml:3:15: jobs.a.schedule: schedule "0 0 30 2 *" never fires',
      'jobs.yaml:6:15: jobs.b.schedule: schedule "0 0 30 2 *" never fires',
    ],
  ],
  [
    "April 31st",
    job('schedule: "0 0 31 4 *"', "command: x"),
    ['jobs.yaml:3:15: jobs.a.schedule: schedule "0 0 31 4 *" never fires'],
  ],
  [
    "an unknown macro",
    job('schedule: "@every 5m"', "command: x"),
    [
      'jobs.yaml:3:15: jobs.a.schedule: schedule "@every 5m": unknown macro (use @yearly @annually @monthly @weekly @daily @midnight @hourly @reboot)',
    ],
  ],
  [
    "illegal characters in a field",
    job('schedule: "1,2,x * * * *"', "command: x"),
    [
      'jobs.yaml:3:15: jobs.a.schedule: schedule "1,2,x * * * *": minute field "1,2,x" contains illegal characters',
    ],
  ],
  [
    "a backwards range",
    job('schedule: "5-1 * * * *"', "command: x"),
    [
      "jobs.yaml:3:15: jobs.a.schedule: schedule \"5-1 * * * *\": from value is larger than to value: '5-1'",
    ],
  ],
  [
    "day-of-week 8",
    job('schedule: "0 0 * * 8"', "command: x"),
    ['jobs.yaml:3:15: jobs.a.schedule: schedule "0 0 * * 8": invalid value for day-of-week: 8'],
  ],
  [
    "a zero step",
    job('schedule: "*/0 * * * *"', "command: x"),
    ['jobs.yaml:3:15: jobs.a.schedule: schedule "*/0 * * * *": syntax error, illegal stepping: 0'],
  ],
  [
    "an empty schedule",
    job('schedule: ""', "command: x"),
    ["jobs.yaml:3:15: jobs.a.schedule: schedule is empty"],
  ],
  [
    "a number as schedule",
    job("schedule: 5", "command: x"),
    [
      'jobs.yaml:3:15: jobs.a.schedule: expected a cron expression in quotes, e.g. "0 2 * * *", got 5',
    ],
  ],
  [
    "a job name with a capital",
    J("jobs:", "  Backup:", '    schedule: "@daily"', "    command: x"),
    [
      'jobs.yaml:2:3: jobs: bad job name "Backup": use 1-64 of a-z 0-9 _ . - starting with a letter or digit',
    ],
  ],
  [
    "a job name that walks out of the state dir",
    J("jobs:", "  ../x:", '    schedule: "@daily"', "    command: x"),
    [
      'jobs.yaml:2:3: jobs: bad job name "../x": use 1-64 of a-z 0-9 _ . - starting with a letter or digit',
    ],
  ],
  [
    "a job name of 65 characters",
    J("jobs:", "  " + "a".repeat(65) + ":", '    schedule: "@daily"', "    command: x"),
    [
      'jobs.yaml:2:3: jobs: bad job name "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": use 1-64 of a-z 0-9 _ . - starting with a letter or digit',
    ],
  ],
  [
    "a job that is a string",
    J("jobs:", "  a: echo hi"),
    ['jobs.yaml:2:6: jobs.a: expected a map with "schedule" and "command", got "echo hi"'],
  ],
  [
    "a job with nothing",
    J("jobs:", "  a:"),
    ['jobs.yaml:2:3: jobs.a: expected a map with "schedule" and "command", got nothing'],
  ],
  [
    "jobs as a list",
    J("jobs: [a, b]"),
    ["jobs.yaml:1:7: jobs: expected a map of jobs by name, got a list"],
  ],
  [
    "a misspelt time zone",
    job(...ok, "timezone: Europe/Berln"),
    [
      'jobs.yaml:5:15: jobs.a.timezone: unknown time zone "Europe/Berln" (did you mean "Europe/Berlin"?)',
    ],
  ],
  [
    "an unknown top-level time zone",
    J("timezone: Mars/Base", "jobs: {}"),
    ['jobs.yaml:1:11: timezone: unknown time zone "Mars/Base"'],
  ],
  [
    "a duration without a unit",
    job(...ok, "timeout: 30"),
    ['jobs.yaml:5:14: jobs.a.timeout: bad duration "30": needs a unit, e.g. 30s'],
  ],
  [
    "a duration in weeks",
    job(...ok, "timeout: 5w"),
    ['jobs.yaml:5:14: jobs.a.timeout: bad duration "5w": unknown unit "w" (use ms, s, m, h or d)'],
  ],
  [
    "a duration in words",
    job(...ok, "timeout: soon"),
    ['jobs.yaml:5:14: jobs.a.timeout: bad duration "soon": expected a number and a unit, e.g. 30s'],
  ],
  [
    "none where a duration is required",
    job(...ok, "kill_grace: none"),
    [
      'jobs.yaml:5:17: jobs.a.kill_grace: bad duration "none": expected a number and a unit, e.g. 30s',
    ],
  ],
  [
    "a zero heartbeat",
    J("heartbeat: 0s", "jobs: {}"),
    ["jobs.yaml:1:12: heartbeat: must be more than 0"],
  ],
  [
    "a size without a unit",
    job(...ok, "log: { max_size: 10 }"),
    ['jobs.yaml:5:22: jobs.a.log.max_size: bad size "10": needs a unit, e.g. 10MB'],
  ],
  [
    "a size in XB",
    job(...ok, "log: { max_size: 10XB }"),
    [
      'jobs.yaml:5:22: jobs.a.log.max_size: bad size "10XB": unknown unit "XB" (use B, KB, MB, GB or TB)',
    ],
  ],
  [
    "negative retries",
    job(...ok, "retries: { attempts: -1 }"),
    ["jobs.yaml:5:26: jobs.a.retries.attempts: expected a whole number (0 or more), got -1"],
  ],
  [
    "fractional retries",
    job(...ok, "retries: { attempts: 1.5 }"),
    ["jobs.yaml:5:26: jobs.a.retries.attempts: expected a whole number (0 or more), got 1.5"],
  ],
  [
    "retries as a quoted string",
    job(...ok, 'retries: { attempts: "3" }'),
    ['jobs.yaml:5:26: jobs.a.retries.attempts: expected a whole number (0 or more), got "3"'],
  ],
  [
    "a misspelt retries key",
    job(...ok, "retries: { attempt: 3 }"),
    ['jobs.yaml:5:16: jobs.a.retries: unknown key "attempt" (did you mean "attempts"?)'],
  ],
  [
    "a misspelt overlap",
    job(...ok, "overlap: skp"),
    [
      'jobs.yaml:5:14: jobs.a.overlap: expected one of skip, queue, replace, allow, got "skp" (did you mean "skip"?)',
    ],
  ],
  [
    "an unknown catchup",
    job(...ok, "catchup: always"),
    ['jobs.yaml:5:14: jobs.a.catchup: expected one of skip, once, all, got "always"'],
  ],
  [
    "paused: yes",
    job(...ok, "paused: yes"),
    ['jobs.yaml:5:13: jobs.a.paused: expected true or false, got "yes"'],
  ],
  [
    "a uid as user",
    job(...ok, "user: 1000"),
    ["jobs.yaml:5:11: jobs.a.user: expected a non-empty string, got 1000"],
  ],
  [
    "env as a list",
    job(...ok, "env: [A=1]"),
    ["jobs.yaml:5:10: jobs.a.env: expected a map of NAME: value, got a list"],
  ],
  [
    "a bad env name",
    job(...ok, "env: { 1X: a }"),
    [
      'jobs.yaml:5:12: jobs.a.env: bad variable name "1X": use letters, digits and _, not starting with a digit',
    ],
  ],
  [
    "a map as an env value",
    job(...ok, "env: { A: { b: 1 } }"),
    ["jobs.yaml:5:15: jobs.a.env.A: expected a string, got a map"],
  ],
  [
    "an env value with nothing",
    job(...ok, "env:", "  A:"),
    ['jobs.yaml:6:7: jobs.a.env.A: expected a string, got nothing (write "" for an empty string)'],
  ],
  [
    "a CRONVISOR_ env name",
    job(...ok, "env: { CRONVISOR_JOB: x }"),
    ['jobs.yaml:5:12: jobs.a.env: "CRONVISOR_JOB" is reserved: cronvisor sets CRONVISOR_* itself'],
  ],
  [
    "http without a port",
    J("http: localhost", "jobs: {}"),
    ['jobs.yaml:1:7: http: expected HOST:PORT, e.g. 127.0.0.1:9464, got "localhost"'],
  ],
  [
    "http port out of range",
    J("http: 127.0.0.1:70000", "jobs: {}"),
    ["jobs.yaml:1:7: http: port must be 1-65535, got 70000"],
  ],
  [
    "http as a bare port",
    J("http: 9464", "jobs: {}"),
    ["jobs.yaml:1:7: http: expected HOST:PORT, e.g. 127.0.0.1:9464, got 9464"],
  ],
  [
    "alerts as a map",
    J("alerts: { webhook: http://x }", "jobs: {}"),
    ["jobs.yaml:1:9: alerts: expected a list of {webhook: URL} or {command: STRING}, got a map"],
  ],
  [
    "an alert with webhook and command",
    J("alerts:", "  - { webhook: http://x, command: y }", "jobs: {}"),
    ['jobs.yaml:2:5: alerts[0]: an alert has either "webhook" or "command", not both'],
  ],
  [
    "a misspelt alert key",
    J("alerts:", "  - webhok: http://x", "jobs: {}"),
    ['jobs.yaml:2:5: alerts[0]: unknown key "webhok" (did you mean "webhook"?)'],
  ],
  [
    "an ftp webhook",
    J("alerts:", "  - webhook: ftp://x", "jobs: {}"),
    ['jobs.yaml:2:14: alerts[0].webhook: expected an http(s) URL, got "ftp://x"'],
  ],
  [
    "an alert that is a string",
    J("alerts:", "  - http://x", "jobs: {}"),
    ['jobs.yaml:2:5: alerts[0]: expected {webhook: URL} or {command: STRING}, got "http://x"'],
  ],
  [
    "an empty alert",
    J("alerts:", "  - {}", "jobs: {}"),
    ["jobs.yaml:2:5: alerts[0]: expected {webhook: URL} or {command: STRING}, got an empty map"],
  ],
  [
    "a ping without a scheme",
    job(...ok, "ping: hc-ping.com/abc"),
    ['jobs.yaml:5:11: jobs.a.ping: expected an http(s) URL, got "hc-ping.com/abc"'],
  ],
  [
    "repeat_limit 0",
    job(...ok, "health: { repeat_limit: 0 }"),
    ["jobs.yaml:5:29: jobs.a.health.repeat_limit: expected a whole number (1 or more), got 0"],
  ],
  [
    "an unknown health key",
    job(...ok, "health: { success_in: 1h }"),
    ['jobs.yaml:5:15: jobs.a.health: unknown key "success_in"'],
  ],
  [
    "keep_runs 0",
    job(...ok, "log: { keep_runs: 0 }"),
    ["jobs.yaml:5:23: jobs.a.log.keep_runs: expected a whole number (1 or more), got 0"],
  ],
  [
    "a misspelt default",
    J("defaults: { timout: 1h }", "jobs: {}"),
    ['jobs.yaml:1:13: defaults: unknown key "timout" (did you mean "timeout"?)'],
  ],
  [
    "defaults as a number",
    J("defaults: 5", "jobs: {}"),
    ["jobs.yaml:1:11: defaults: expected a map of job settings, got 5"],
  ],
  [
    "an empty shell",
    J('shell: ""', "jobs: {}"),
    ['jobs.yaml:1:8: shell: expected a non-empty string, got ""'],
  ],
  [
    "a number as state_dir",
    J("state_dir: 5", "jobs: {}"),
    ["jobs.yaml:1:12: state_dir: expected a non-empty string, got 5"],
  ],
  [
    "an unquoted value with a colon",
    job("command: echo a: b", 'schedule: "@daily"'),
    ['jobs.yaml:3:14: jobs.a.command: a plain value cannot contain ": "; quote it'],
  ],
  [
    "an unquoted command starting with *",
    job('schedule: "@daily"', "command: *run"),
    [
      'jobs.yaml:4:14: jobs.a.command: value "*run" must be quoted: YAML reads a leading * as an alias',
    ],
  ],
  [
    "an empty env_file",
    job(...ok, 'env_file: ""'),
    ['jobs.yaml:5:15: jobs.a.env_file: expected a non-empty string, got ""'],
  ],
  [
    "a YAML tag",
    job('schedule: "@daily"', "command: !env CMD"),
    ["jobs.yaml:4:14: jobs.a.command: unresolved tag: !env"],
  ],
  [
    "many errors, sorted by position",
    J(
      "timezone: Mars",
      "heartbeat: 10",
      "jobs:",
      "  Bad:",
      '    schedule: "0 0 30 2 *"',
      "  good:",
      '    schedule: "@daily"',
      "    command: x",
      "    overlap: never",
    ),
    [
      'jobs.yaml:1:11: timezone: unknown time zone "Mars"',
      'jobs.yaml:2:12: heartbeat: bad duration "10": needs a unit, e.g. 30s',
      'jobs.yaml:4:3: jobs: bad job name "Bad": use 1-64 of a-z 0-9 _ . - starting with a letter or digit',
      'jobs.yaml:4:3: jobs.Bad: missing "command"',
      'jobs.yaml:5:15: jobs.Bad.schedule: schedule "0 0 30 2 *" never fires',
      'jobs.yaml:9:14: jobs.good.overlap: expected one of skip, queue, replace, allow, got "never"',
    ],
  ],
];

for (const [name, text, want] of CORPUS) {
  test(`bad config: ${name}`, () => {
    const { config, lines } = messages(text);
    assert.deepEqual(lines, want);
    assert.equal(config, null);
  });
}

test("the corpus is big enough to matter", () => {
  assert.ok(CORPUS.length >= 40, `${CORPUS.length} cases`);
});

test("a minimal job gets every default", () => {
  const config = valid(job('schedule: "0 2 * * *"', "command: ./enrich.sh"));
  assert.deepEqual(config, {
    file: FILE,
    stateDir: "/srv/app/.cronvisor",
    timezone: "Europe/Berlin",
    shell: "/bin/sh",
    env: {},
    heartbeatMs: 10_000,
    store: null,
    passwordFile: null,
    allowOpenDatabase: false,
    logTails: true,
    node: null,
    leaseMs: 30_000,
    http: null,
    httpLogs: false,
    logsMaxTotalBytes: 1024 ** 3,
    alerts: [],
    groups: [],
    jobs: [
      {
        name: "a",
        schedule: "0 2 * * *",
        pattern: "0 2 * * *",
        command: "./enrich.sh",
        cwd: "/srv/app",
        env: {},
        envFile: null,
        user: null,
        timezone: "Europe/Berlin",
        timeoutMs: null,
        killGraceMs: 10_000,
        overlap: "skip",
        catchup: "once",
        catchupWindowMs: 6 * 3_600_000,
        jitterMs: 0,
        retries: { attempts: 0, backoffMs: 30_000 },
        paused: false,
        health: {
          successWithinMs: null,
          progressWithinMs: null,
          repeatLimit: 3,
          newWorkWithinMs: null,
        },
        log: { maxSizeBytes: 1024 * 1024, keepRuns: 100 },
        ping: null,
        failuresBeforeAlert: 1,
        realertEveryMs: null,
        hosts: null,
        leftovers: "kill",
        limits: { memoryBytes: null, cpuPercent: null, tasks: null, nofile: null },
        locks: [],
        group: null,
        priority: 0,
        then: [],
        thenOnFailure: [],
        blackouts: [],
        line: 2,
      },
    ],
  });
});

test("the design's example config is read as documented", () => {
  const config = valid(
    J(
      "state_dir: ./.cronvisor",
      "timezone: UTC",
      "shell: /bin/sh",
      "env: { PATH: /usr/local/bin:/usr/bin:/bin }",
      "heartbeat: 10s",
      "http: 127.0.0.1:9464",
      "alerts:",
      "  - webhook: http://127.0.0.1:8080/hook",
      "  - command: /usr/local/bin/notify",
      "defaults: { timeout: 1h, overlap: skip }",
      "groups: { heavy: { max_running: 2 } }",
      'blackouts: { xmas: "2026-12-24..2026-12-26", weekend: "Sat 00:00-06:00" }',
      "jobs:",
      "  enrich:",
      '    schedule: "0 2 * * *"',
      "    command: ./enrich.sh",
      "    cwd: /srv/app",
      "    env: { MODE: nightly }",
      "    env_file: /etc/cronvisor/enrich.env",
      "    user: app",
      "    timezone: Europe/Berlin",
      "    timeout: 30m",
      "    kill_grace: 10s",
      "    overlap: skip",
      "    catchup: once",
      "    catchup_window: 6h",
      "    jitter: 30s",
      "    retries: { attempts: 3, backoff: 30s }",
      "    paused: false",
      "    health:",
      "      success_within: 26h",
      "      progress_within: 10m",
      "      repeat_limit: 3",
      "      new_work_within: 2d",
      "    log: { max_size: 10MB, keep_runs: 100 }",
      "    failures_before_alert: 3",
      "    realert_every: 6h",
      "    ping: https://hc-ping.com/UUID",
      "    locks: [db]",
      "    group: heavy",
      "    priority: 0",
      "    then: [report]",
      "    then_on_failure: [cleanup]",
      '    blackouts: [xmas, "Sun 02:00-04:00"]',
      "  report: { schedule: '0 3 * * *', command: ./report.sh }",
      "  cleanup: { schedule: '0 4 * * *', command: ./cleanup.sh }",
    ),
  );
  assert.equal(config.timezone, "UTC");
  assert.deepEqual(config.http, { host: "127.0.0.1", port: 9464 });
  assert.deepEqual(config.alerts, [
    { kind: "webhook", url: "http://127.0.0.1:8080/hook" },
    { kind: "command", command: "/usr/local/bin/notify" },
  ]);
  assert.deepEqual(config.groups, [{ name: "heavy", maxRunning: 2 }]);
  const [enrich] = config.jobs;
  assert.deepEqual(
    { ...enrich, line: undefined },
    {
      name: "enrich",
      schedule: "0 2 * * *",
      pattern: "0 2 * * *",
      command: "./enrich.sh",
      cwd: "/srv/app",
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", MODE: "nightly" },
      envFile: "/etc/cronvisor/enrich.env",
      user: "app",
      timezone: "Europe/Berlin",
      timeoutMs: 30 * 60_000,
      killGraceMs: 10_000,
      overlap: "skip",
      catchup: "once",
      catchupWindowMs: 6 * 3_600_000,
      jitterMs: 30_000,
      retries: { attempts: 3, backoffMs: 30_000 },
      paused: false,
      health: {
        successWithinMs: 26 * 3_600_000,
        progressWithinMs: 600_000,
        repeatLimit: 3,
        newWorkWithinMs: 2 * 86_400_000,
      },
      log: { maxSizeBytes: 10 * 1024 * 1024, keepRuns: 100 },
      ping: "https://hc-ping.com/UUID",
      failuresBeforeAlert: 3,
      realertEveryMs: 6 * 3_600_000,
      hosts: null,
      leftovers: "kill",
      limits: { memoryBytes: null, cpuPercent: null, tasks: null, nofile: null },
      locks: ["db"],
      group: "heavy",
      priority: 0,
      then: ["report"],
      thenOnFailure: ["cleanup"],
      blackouts: [
        {
          name: "xmas",
          window: { kind: "dates", from: "2026-12-24 00:00", to: "2026-12-27 00:00" },
        },
        { name: "Sun 02:00-04:00", window: { kind: "weekly", days: [0], start: 120, end: 240 } },
      ],
      line: undefined,
    },
  );
  assert.equal(enrich.line, 14);
});

test("the many-hosts keys: store, password_file (relative to the file), node, lease, hosts", () => {
  const config = valid(
    J(
      'store: "postgresql://cronvisor@db.internal:5432/cronvisor"',
      "password_file: secrets/pgpass",
      "node: app01",
      "lease: 45s",
      "jobs:",
      "  a:",
      ...ok.map((l) => "    " + l),
      "    hosts: [app01, app02]",
    ),
  );
  assert.equal(config.store, "postgresql://cronvisor@db.internal:5432/cronvisor");
  assert.equal(config.passwordFile, "/srv/app/secrets/pgpass");
  assert.equal(config.node, "app01");
  assert.equal(config.leaseMs, 45_000);
  assert.deepEqual(config.jobs[0].hosts, ["app01", "app02"]);
});

test("paths are relative to the config file's directory; absolute ones stay", () => {
  const rel = valid(
    J(
      "state_dir: state",
      "jobs:",
      "  a:",
      ...ok.map((l) => "    " + l),
      "    cwd: ../work",
      "    env_file: secrets/a.env",
    ),
  );
  assert.equal(rel.stateDir, "/srv/app/state");
  assert.equal(rel.jobs[0].cwd, "/srv/work");
  assert.equal(rel.jobs[0].envFile, "/srv/app/secrets/a.env");
  const abs = valid(
    J(
      "state_dir: /var/lib/cronvisor",
      "defaults: { cwd: /tmp }",
      "jobs:",
      "  a:",
      ...ok.map((l) => "    " + l),
    ),
  );
  assert.equal(abs.stateDir, "/var/lib/cronvisor");
  assert.equal(abs.jobs[0].cwd, "/tmp");
});

test("a job's time zone is its own, else the config's, else the host's", () => {
  const text = (top, own) =>
    J(
      ...(top ? [`timezone: ${top}`] : []),
      "jobs:",
      "  a:",
      ...ok.map((l) => "    " + l),
      ...(own ? [`    timezone: ${own}`] : []),
    );
  assert.equal(valid(text(null, null)).jobs[0].timezone, "Europe/Berlin");
  assert.equal(valid(text(null, null), {}).jobs[0].timezone, "UTC");
  assert.equal(valid(text("Asia/Tokyo", null)).jobs[0].timezone, "Asia/Tokyo");
  assert.equal(valid(text("Asia/Tokyo", "America/New_York")).jobs[0].timezone, "America/New_York");
  const viaDefaults = valid(
    J(
      "timezone: Asia/Tokyo",
      "defaults: { timezone: Africa/Cairo }",
      "jobs:",
      "  a:",
      ...ok.map((l) => "    " + l),
    ),
  );
  assert.equal(viaDefaults.timezone, "Asia/Tokyo");
  assert.equal(viaDefaults.jobs[0].timezone, "Africa/Cairo");
});

test("defaults fill in; a job's values win; maps merge key by key", () => {
  const config = valid(
    J(
      "env: { A: top, B: top }",
      "defaults:",
      "  timeout: 1h",
      "  overlap: queue",
      "  env: { B: defaults, C: defaults }",
      "  retries: { attempts: 2 }",
      "  health: { success_within: 26h, repeat_limit: 5 }",
      "  log: { keep_runs: 7 }",
      "jobs:",
      "  a:",
      '    schedule: "@hourly"',
      "    command: x",
      "    timeout: none",
      "    env: { C: job, D: job }",
      "    retries: { backoff: 1m }",
      "    health: { progress_within: 10m, repeat_limit: 9 }",
      "  b:",
      '    schedule: "@hourly"',
      "    command: y",
    ),
  );
  const [a, b] = config.jobs;
  assert.equal(a.timeoutMs, null, "none switches a default off");
  assert.equal(b.timeoutMs, 3_600_000);
  assert.equal(a.overlap, "queue");
  assert.deepEqual(config.env, { A: "top", B: "top" });
  assert.deepEqual(a.env, { A: "top", B: "defaults", C: "job", D: "job" });
  assert.deepEqual(b.env, { A: "top", B: "defaults", C: "defaults" });
  assert.deepEqual(a.retries, { attempts: 2, backoffMs: 60_000 });
  assert.deepEqual(b.retries, { attempts: 2, backoffMs: 30_000 });
  assert.deepEqual(a.health, {
    successWithinMs: 93_600_000,
    progressWithinMs: 600_000,
    repeatLimit: 9,
    newWorkWithinMs: null,
  });
  assert.deepEqual(b.health, {
    successWithinMs: 93_600_000,
    progressWithinMs: null,
    repeatLimit: 5,
    newWorkWithinMs: null,
  });
  assert.deepEqual(a.log, { maxSizeBytes: 1024 * 1024, keepRuns: 7 });
});

test("env values that YAML reads as numbers or booleans are kept as written", () => {
  const config = valid(
    job(...ok, "env: { PORT: 08080, VERSION: 1.10, DEBUG: true, EMPTY: '', HEX: 0x1F }"),
  );
  assert.deepEqual(config.jobs[0].env, {
    PORT: "08080",
    VERSION: "1.10",
    DEBUG: "true",
    EMPTY: "",
    HEX: "0x1F",
  });
});

test("a command is a string for the shell or an argv list", () => {
  const config = valid(
    J(
      "jobs:",
      "  s:",
      '    schedule: "@daily"',
      "    command: echo hi > /dev/null",
      "  v:",
      '    schedule: "@daily"',
      "    command: [sleep, 5, --flag]",
    ),
  );
  assert.equal(config.jobs[0].command, "echo hi > /dev/null");
  assert.deepEqual(config.jobs[1].command, ["sleep", "5", "--flag"]);
});

test("macros expand to 5 fields; @reboot has no pattern; 6 fields put seconds first", () => {
  const want = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
    "@reboot": null,
    "*/15  *  * * * *": "*/15 * * * * *",
    " 0 2 * * mon-fri ": "0 2 * * mon-fri",
  };
  for (const [schedule, pattern] of Object.entries(want)) {
    const [j] = valid(job(`schedule: "${schedule}"`, "command: x")).jobs;
    assert.equal(j.schedule, schedule);
    assert.equal(j.pattern, pattern, schedule);
  }
});

test("jobs keep file order and the line of their key; empty maps and jobs: {} are fine", () => {
  const config = valid(
    J(
      "env:",
      "alerts:",
      "defaults:",
      "jobs:",
      "  zeta:",
      ...ok.map((l) => "    " + l),
      "",
      "  alpha:",
      ...ok.map((l) => "    " + l),
      "    health:",
    ),
  );
  assert.deepEqual(
    config.jobs.map((j) => [j.name, j.line]),
    [
      ["zeta", 5],
      ["alpha", 9],
    ],
  );
  assert.deepEqual(valid("jobs: {}\n").jobs, []);
});

test("http takes a host name or a bracketed IPv6 address", () => {
  assert.deepEqual(valid(J("http: localhost:80", "jobs: {}")).http, {
    host: "localhost",
    port: 80,
  });
  assert.deepEqual(valid(J("http: '[::1]:9464'", "jobs: {}")).http, { host: "::1", port: 9464 });
});

test("the config holds plain data only (no croner objects) and parsing is repeatable", () => {
  const text = J(
    "jobs:",
    ...["a", "b", "c"].flatMap((n) => [`  ${n}:`, '    schedule: "*/5 * * * *"', "    command: x"]),
  );
  const first = valid(text);
  assert.deepEqual(JSON.parse(JSON.stringify(first)), first);
  assert.deepEqual(valid(text), first);
});

test("nextFireTimes: day-of-month and day-of-week are OR'ed, as in Vixie cron", () => {
  const [j] = valid(job('schedule: "0 0 1 * mon"', "command: x", "timezone: UTC")).jobs;
  // 2026-02-01 is a Sunday: it fires for being the 1st, then on each Monday.
  const times = nextFireTimes(j, new Date("2026-01-31T12:00:00Z"), 6).map((d) => d.toISOString());
  assert.deepEqual(times, [
    "2026-02-01T00:00:00.000Z",
    "2026-02-02T00:00:00.000Z",
    "2026-02-09T00:00:00.000Z",
    "2026-02-16T00:00:00.000Z",
    "2026-02-23T00:00:00.000Z",
    "2026-03-01T00:00:00.000Z",
  ]);
});

test("nextFireTimes runs in the job's zone, across a DST change, strictly after `from`", () => {
  const [j] = valid(job('schedule: "30 2 * * *"', "command: x", "timezone: Europe/Berlin")).jobs;
  const times = nextFireTimes(j, new Date("2026-03-28T01:30:00Z"), 3).map((d) => d.toISOString());
  // 02:30 does not exist on 2026-03-29 in Berlin; a fixed-time job runs right after the gap.
  assert.deepEqual(times, [
    "2026-03-29T01:00:00.000Z",
    "2026-03-30T00:30:00.000Z",
    "2026-03-31T00:30:00.000Z",
  ]);
  const seconds = valid(job('schedule: "*/20 * * * * *"', "command: x")).jobs[0];
  assert.deepEqual(
    nextFireTimes(seconds, new Date("2026-01-01T00:00:00Z"), 3).map((d) => d.toISOString()),
    ["2026-01-01T00:00:20.000Z", "2026-01-01T00:00:40.000Z", "2026-01-01T00:01:00.000Z"],
  );
  const reboot = valid(job('schedule: "@reboot"', "command: x")).jobs[0];
  assert.deepEqual(nextFireTimes(reboot, new Date(), 3), []);
});

test("loadConfig reads the file, keeps the path as given in messages, and resolves it", (t) => {
  const dir = tmpdir(t);
  writeConfig(dir, job(...ok, "cwd: sub"));
  const { config, errors } = loadConfig(path.join(dir, "jobs.yaml"));
  assert.deepEqual(errors, []);
  assert.equal(config.file, path.join(dir, "jobs.yaml"));
  assert.equal(config.jobs[0].cwd, path.join(dir, "sub"));

  writeConfig(dir, job(...ok, "paused: yes"), "bad.yaml");
  const bad = loadConfig(path.join(dir, "bad.yaml"));
  assert.deepEqual(bad.errors.map(formatConfigError), [
    `${path.join(dir, "bad.yaml")}:5:13: jobs.a.paused: expected true or false, got "yes"`,
  ]);
});

test("loadConfig: a file it cannot read is one error at 1:1", (t) => {
  const dir = tmpdir(t);
  const missing = path.join(dir, "nope.yaml");
  assert.deepEqual(loadConfig(missing), {
    config: null,
    errors: [
      { file: missing, line: 1, col: 1, path: "(file)", message: "cannot read: no such file" },
    ],
  });
  assert.deepEqual(loadConfig(dir).errors.map(formatConfigError), [
    `${dir}:1:1: (file): cannot read: is a directory`,
  ]);
});

test("loadConfig takes the host's time zone and a relative path from the working directory", (t) => {
  const dir = tmpdir(t);
  fs.writeFileSync(path.join(dir, "jobs.yaml"), job(...ok));
  const script =
    'import { loadConfig } from "' +
    path.join(ROOT, "dist", "config", "config.js") +
    '";' +
    'const { config } = loadConfig("jobs.yaml");' +
    "console.log(JSON.stringify([config.file, config.timezone, config.jobs[0].timezone]));";
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: dir,
    env: { ...process.env, TZ: "Asia/Tokyo" },
    encoding: "utf8",
  });
  assert.equal(r.stderr, "");
  assert.deepEqual(JSON.parse(r.stdout), [
    path.join(fs.realpathSync(dir), "jobs.yaml"),
    "Asia/Tokyo",
    "Asia/Tokyo",
  ]);
});

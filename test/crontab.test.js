// import-crontab: crontab text -> jobs YAML. Schedules are checked against an independent cron
// implementation (python3-croniter from Debian), commands byte for byte against hand-written
// expectations, stdin by running the imported command in a real /bin/sh.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { Cron } from "croner";
import { importCrontab } from "../dist/crontab/index.js";
import { ROOT, tmpdir } from "./helpers.js";
import { needsNow } from "./needs.js";

const FIXTURES = path.join(ROOT, "test", "fixtures", "crontab");
const fixture = (name) => fs.readFileSync(path.join(FIXTURES, name), "utf8");
const NY = "America/New_York";

/** Import and parse; fails the test on any error. */
function imported(text, opts = {}) {
  const r = importCrontab(text, { file: "crontab", ...opts });
  assert.deepEqual(r.errors, [], r.yaml);
  const doc = YAML.parseDocument(r.yaml);
  assert.deepEqual(doc.errors, []);
  return { ...r, doc, data: doc.toJS() };
}

/** Comments with their wrapped continuation lines joined, for matching whole sentences. */
const flat = (yaml) => yaml.replace(/\n *# {3}/g, " ");

/** The one job of a one-job crontab. */
function onlyJob(text, opts) {
  const { data, warnings, yaml } = imported(text, opts);
  const jobs = Object.values(data.jobs);
  assert.equal(jobs.length, 1, yaml);
  return { job: jobs[0], warnings, yaml };
}

// ---------------------------------------------------------------------------------------------
// The corpus: what each line must become, written by hand from crontab(5) and do_command.c.
// `line` is the crontab line; `cron_tz` the zone cron scheduled the line in (none: the host's).

const USER_JOBS = {
  healthcheck: { line: 9, schedule: "*/5 * * * *", command: "/usr/local/bin/healthcheck.sh" },
  backup: {
    line: 10,
    schedule: "0 3 * * *",
    command: "/usr/local/bin/backup.sh --full >> /var/log/backup.log 2>&1",
  },
  "poll-queue": { line: 11, schedule: "15,45 * * * *", command: "/opt/app/bin/poll-queue" },
  sync: {
    line: 12,
    schedule: "0-59/15 * * * *",
    command: "/usr/bin/python3 /opt/app/sync.py --quiet",
  },
  "rotate-keys": { line: 13, schedule: "0 */7 * * *", command: "/usr/local/bin/rotate-keys" },
  // A step larger than the field selects its first value; croner rejects such steps.
  ninety: { line: 14, schedule: "0 * * * *", command: "/usr/local/bin/ninety" },
  "office-report": {
    line: 15,
    schedule: "0 8-18/2 * * 1-5",
    command: "/usr/local/bin/office-report.sh",
  },
  curl: {
    line: 16,
    schedule: "*/10 9-17 * * mon-fri",
    command:
      "curl -fsS -m 10 --retry 5 -o /dev/null https://hc-ping.com/0c4e9b10-1111-4222-8333-944455556666",
  },
  // Leading tab, tab separators, trailing blanks: blanks around a command mean nothing to sh.
  "backup-2": {
    line: 17,
    schedule: "30 2 * * *",
    command: "/usr/local/bin/backup.sh --incremental",
  },
  "standup-reminder": {
    line: 20,
    schedule: "0 9 * * MON-FRI",
    command: "/usr/local/bin/standup-reminder",
  },
  "quarterly-report": {
    line: 21,
    schedule: "0 0 1 jan,apr,jul,oct *",
    command: "/usr/local/bin/quarterly-report",
  },
  "weekly-digest": { line: 22, schedule: "30 4 * * 7", command: "/usr/local/bin/weekly-digest" },
  "weekend-mode": {
    line: 23,
    schedule: "0 12 * * 5-7",
    command: "/usr/local/bin/weekend-mode on",
  },
  "weekend-mode-2": {
    line: 24,
    schedule: "0 0 * * SAT,Sun",
    command: "/usr/local/bin/weekend-mode check",
  },
  echo: { line: 25, schedule: "5 4 * * sun", command: 'echo "run at 5 after 4 every sunday"' },
  "spring-check": {
    line: 26,
    schedule: "0 0 * feb-apr/2 1",
    command: "/usr/local/bin/spring-check",
  },
  "every-other-day": {
    line: 27,
    schedule: "0 6 * * 1-7/2",
    command: "/usr/local/bin/every-other-day",
  },
  "even-days": { line: 28, schedule: "0 0 * * */2", command: "/usr/local/bin/even-days" },
  payroll: { line: 31, schedule: "30 4 1,15 * 5", command: "/usr/local/bin/payroll" },
  // Day-of-month starts with "*": cron ANDs the day fields; croner needs "+" for that.
  "odd-mondays": { line: 32, schedule: "0 6 */2 * +1", command: "/usr/local/bin/odd-mondays" },
  "leap-day": { line: 33, schedule: "0 0 29 2 *", command: "/usr/local/bin/leap-day" },
  "month-end-31": { line: 34, schedule: "0 0 31 * *", command: "/usr/local/bin/month-end-31" },
  dekad: { line: 35, schedule: "0 0 */10 * *", command: "/usr/local/bin/dekad" },
  "every-day-really": {
    line: 36,
    schedule: "0 5 1-31 * 1",
    command: "/usr/local/bin/every-day-really",
  },
  "start-tunnel": { line: 39, schedule: "@reboot", command: "/usr/local/bin/start-tunnel" },
  "renew-domains": { line: 40, schedule: "@yearly", command: "/usr/local/bin/renew-domains" },
  "archive-year": { line: 41, schedule: "@annually", command: "/usr/local/bin/archive-year" },
  "invoice-run": { line: 42, schedule: "@monthly", command: "/usr/local/bin/invoice-run" },
  fstrim: { line: 43, schedule: "@weekly", command: "/usr/sbin/fstrim -av" },
  find: {
    line: 44,
    schedule: "@daily",
    command: "/usr/bin/find /tmp/uploads -mtime +7 -delete",
  },
  rollover: { line: 45, schedule: "@midnight", command: "/usr/local/bin/rollover" },
  cron: { line: 46, schedule: "@hourly", command: "/usr/bin/php /var/www/html/cron.php" },
  // `%`: the rest is stdin, `%` -> newline, plus a final newline (none added after a last `%`).
  mail: {
    line: 49,
    schedule: "0 22 * * 1-5",
    command: `printf '%s\\n' 'Joe,' '' 'Where are your kids?' | mail -s "It's 10pm" joe`,
  },
  tar: {
    line: 50,
    schedule: "0 1 * * *",
    command: "tar czf /var/backups/home-$(date +%F).tgz /home",
  },
  pg_dump: {
    line: 51,
    schedule: "0 2 * * *",
    command: "pg_dump appdb | gzip > /var/backups/appdb-$(date +%Y%m%d).sql.gz",
  },
  mysql: {
    line: 52,
    schedule: "45 23 * * *",
    command: `printf '%s\\n' 'SELECT COUNT(*) FROM visits;' 'SELECT '\\''100%'\\'';' | /usr/bin/mysql -u report reporting`,
  },
  // More than one pipeline: the whole list reads the stdin, as under cron.
  "console-app-digest": {
    line: 53,
    schedule: "0 7 * * *",
    command: "printf '%s\\n' 'yes' | {\ncd /srv/app && ./bin/console app:digest\n}",
  },
  indexer: {
    line: 56,
    schedule: "*/2 * * * *",
    command: "/usr/local/bin/indexer --batch 500",
    overlap: "skip",
  },
  mailer: {
    line: 57,
    schedule: "*/3 * * * *",
    command: "/usr/local/bin/mailer.sh",
    overlap: "skip",
  },
  thumbnails: {
    line: 58,
    schedule: "*/4 * * * *",
    command: "nice -n 10 /usr/local/bin/thumbnails",
    overlap: "skip",
  },
  report: {
    line: 59,
    schedule: "20 * * * *",
    command: "/usr/local/bin/report --hourly && /usr/local/bin/report --publish",
    overlap: "skip",
  },
  "quiet-job": { line: 60, schedule: "10 * * * *", command: "/usr/local/bin/quiet-job" },
  "import-feed": {
    line: 61,
    schedule: "0 4 * * *",
    command: "/usr/local/bin/import-feed",
    timeout: "5m",
  },
  "ping-upstream": {
    line: 62,
    schedule: "30 4 * * *",
    command: "/usr/local/bin/ping-upstream",
    timeout: "30s",
  },
  "compact-db": {
    line: 63,
    schedule: "0 5 * * *",
    command: "/usr/local/bin/compact-db",
    timeout: "5m",
    kill_grace: "10s",
  },
  "fetch-rates": {
    line: 64,
    schedule: "*/15 * * * *",
    command: "/usr/local/bin/fetch-rates",
    overlap: "skip",
    timeout: "1m",
  },
  // Two lines share one lock file, so they exclude each other: the file becomes the named lock
  // both jobs hold (docs/locks.md), and the flocks go.
  rsync: {
    line: 65,
    schedule: "0 * * * *",
    command: "rsync -a rsync://mirror.example.com/pub/ /srv/mirror/",
    overlap: "skip",
    locks: ["mirror"],
  },
  "mirror-verify": {
    line: 66,
    schedule: "30 * * * *",
    command: "/usr/local/bin/mirror-verify",
    overlap: "skip",
    locks: ["mirror"],
  },
  // A blocking flock waits and then runs: not what overlap: skip does.
  "slow-but-serial": {
    line: 67,
    schedule: "0 6 * * *",
    command: "flock /tmp/slow.lock /usr/local/bin/slow-but-serial",
  },
  // timeout wraps only the first command of the list.
  etl: {
    line: 68,
    schedule: "50 * * * *",
    command: "timeout 1h /usr/local/bin/etl step-one && /usr/local/bin/etl step-two",
  },
  "us-morning-report": {
    line: 72,
    cron_tz: NY,
    schedule: "0 9 * * *",
    command: "/usr/local/bin/us-morning-report",
    timezone: NY,
  },
  "us-weekly-cleanup": {
    line: 73,
    cron_tz: NY,
    schedule: "30 1 * * 0",
    command: "/usr/local/bin/us-weekly-cleanup",
    timezone: NY,
  },
  "quiet-nightly": {
    line: 76,
    cron_tz: NY,
    schedule: "0 3 * * *",
    command: "/usr/local/bin/quiet-nightly",
    timezone: NY,
    env: { PATH: "/opt/tools/bin:/usr/bin:/bin" },
    jitter: "15m",
  },
  sessionclean: {
    line: 77,
    cron_tz: NY,
    schedule: "0 * * * *",
    command: "[ -x /usr/lib/php/sessionclean ] && /usr/lib/php/sessionclean",
    timezone: NY,
    env: { PATH: "/opt/tools/bin:/usr/bin:/bin" },
    jitter: "15m",
  },
};

const SYSTEM_JOBS = {
  "cron.hourly": {
    line: 8,
    schedule: "17 * * * *",
    user: "root",
    command: "cd / && run-parts --report /etc/cron.hourly",
  },
  "cron.daily": {
    line: 9,
    schedule: "25 6 * * *",
    user: "root",
    command: "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }",
  },
  "cron.weekly": {
    line: 10,
    schedule: "47 6 * * 7",
    user: "root",
    command: "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.weekly; }",
  },
  "cron.monthly": {
    line: 11,
    schedule: "52 6 1 * *",
    user: "root",
    command: "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.monthly; }",
  },
  certbot: {
    line: 14,
    schedule: "0 */12 * * *",
    user: "root",
    command:
      "test -x /usr/bin/certbot -a \\! -d /run/systemd/system && perl -e 'sleep int(rand(43200))' && certbot -q renew",
  },
  sessionclean: {
    line: 16,
    schedule: "09,39 * * * *",
    user: "root",
    command:
      "[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; then /usr/lib/php/sessionclean; fi",
  },
  "debian-sa1": {
    line: 18,
    schedule: "5-55/10 * * * *",
    user: "root",
    command: "command -v debian-sa1 > /dev/null && debian-sa1 1 1",
  },
  "debian-sa1-2": {
    line: 19,
    schedule: "59 23 * * *",
    user: "root",
    command: "command -v debian-sa1 > /dev/null && debian-sa1 60 2",
  },
  cron: {
    line: 21,
    schedule: "*/5 * * * *",
    user: "www-data",
    command: "php -f /var/www/nextcloud/cron.php",
    overlap: "skip",
  },
  firstboot: {
    line: 22,
    schedule: "@reboot",
    user: "root",
    command: "/usr/local/sbin/firstboot --once",
  },
  pg_dumpall: {
    line: 25,
    schedule: "30 3 * * *",
    user: "postgres",
    command: "printf '%s\\n' 'ignored-input' | pg_dumpall | gzip > /var/backups/pg.sql.gz",
    cwd: "/var/lib/postgresql",
    env: { HOME: "/var/lib/postgresql" },
  },
};

const CORPORA = [
  { file: "user.crontab", jobs: USER_JOBS },
  { file: "system.crontab", jobs: SYSTEM_JOBS },
];

const strip = (expected) => {
  const { line: _line, cron_tz: _tz, ...job } = expected;
  return job;
};

test("the corpus has at least 40 job lines, in both formats", () => {
  const jobLines = CORPORA.flatMap(({ file }) =>
    fixture(file)
      .split("\n")
      .filter((l) => /^\s*-?[0-9*@]/.test(l)),
  );
  assert.ok(jobLines.length >= 40, `${jobLines.length} job lines`);
  assert.equal(Object.keys(USER_JOBS).length + Object.keys(SYSTEM_JOBS).length, jobLines.length);
});

for (const { file, jobs } of CORPORA) {
  test(`${file}: every job, byte for byte, with its line above it`, () => {
    const text = fixture(file);
    const { data, yaml, warnings } = imported(text, { file });
    assert.deepEqual(warnings, []);
    assert.deepEqual(Object.keys(data.jobs), Object.keys(jobs));
    const lines = text.split("\n");
    for (const [name, expected] of Object.entries(jobs)) {
      assert.deepEqual(data.jobs[name], strip(expected), name);
      // The crontab line, then any notes, right above the job's key.
      const above = yaml.split(`\n  # line ${expected.line}: ${lines[expected.line - 1]}\n`)[1];
      assert.ok(above, `${name}: no comment with line ${expected.line}`);
      assert.equal(
        above.split("\n").find((l) => !l.startsWith("  #")),
        `  ${name}:`,
        name,
      );
    }
    assert.match(
      yaml,
      /^# yaml-language-server: \$schema=\.\/node_modules\/cronvisor\/schema\/jobs\.schema\.json\n/,
    );
    // Every schedule is quoted: an unquoted `*/5 * * * *` would be a YAML alias.
    for (const m of yaml.matchAll(/^ {4}schedule: (.*)$/gm)) assert.match(m[1], /^"[^"]+"$/);
  });
}

test("user.crontab: top-level settings and header comments", () => {
  const { data, yaml } = imported(fixture("user.crontab"));
  assert.deepEqual(
    { ...data, jobs: undefined },
    {
      shell: "/bin/bash",
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "en_US.UTF-8" },
      jobs: undefined,
    },
  );
  assert.match(
    yaml,
    /^# format: user crontab \(five time fields, then the command\), detected because line 9's sixth field "\/usr\/local\/bin\/healthcheck.sh" cannot be a user name$/m,
  );
  assert.match(
    yaml,
    /^# MAILTO=ops@example.com: cron mailed job output there; .* add an alerts: entry/ms,
  );
  for (const topic of [
    "Overlaps",
    "Output",
    "Environment",
    "Working directory",
    "Missed runs",
    "DST",
  ]) {
    assert.match(yaml, new RegExp(`^# - ${topic}: `, "m"));
  }
});

test("system.crontab: format detected from the user column, said in a comment", () => {
  const { data, yaml } = imported(fixture("system.crontab"));
  assert.equal(data.shell, "/bin/sh");
  assert.deepEqual(data.env, {
    PATH: "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin",
  });
  assert.match(
    yaml,
    /^# format: system crontab \(a user column before the command\), detected because every job line names a user in column 6 \(root, www-data, postgres\)$/m,
  );
});

test("the output validates as a cronvisor config", async (t) => {
  const configJs = path.join(ROOT, "dist", "config", "config.js");
  // Skipped only when run against a partial build; npm test always builds dist/ first.
  if (needsNow(t, !fs.existsSync(configJs) && "dist/config/config.js is not built")) return;
  const { parseConfig } = await import(configJs);
  const dir = tmpdir(t);
  for (const { file } of CORPORA) {
    const { yaml } = imported(fixture(file));
    const r = parseConfig(yaml, path.join(dir, "jobs.yaml"));
    assert.deepEqual(r.errors, [], file);
    assert.equal(
      r.config.jobs.length,
      Object.keys(file === "user.crontab" ? USER_JOBS : SYSTEM_JOBS).length,
    );
  }
});

// ---------------------------------------------------------------------------------------------
// Schedules against croniter

const CRONITER_MISSING = "python3-croniter is not installed (apt-get install python3-croniter)";

/**
 * The next `n` fire times of each case per croniter, in one python run, as local wall-clock times
 * ("2026-03-08T02:30") in the case's zone. null when python3-croniter is not installed.
 *
 * croniter (1.3.5, Debian 12) parses the crontab fields: names, ranges, steps, lists and 7 as
 * Sunday. Its search for the next time is not used, because it is wrong in three ways:
 * - across a DST change in a time zone (from New York, `0 0 1 jan,apr,jul,oct *` fires at 03:00
 *   and 04:00 UTC on April 1st, and at 01:00 EST on January 1st);
 * - after February, with a day above 29 in the list: `0 0 1,31 * *` skips March 1st;
 * - it ORs the day fields by whether they expand to every value, not by whether they start with
 *   `*` as cron does (`0 0 *\/2 * 1`, `0 0 1-31 * 1`).
 * So the times come from croniter's expansion of the fields, walked day by day on a naive
 * (DST-free) calendar, with cron's rule for the two day fields (`and_days`, from crontab(5):
 * AND when either field starts with `*`, else OR). croner's instants are compared as wall-clock
 * times in the same zone, leaving out the days near a clock change (see `comparable`).
 */
function croniter(cases) {
  const script = `
import json, sys
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo
from croniter import croniter

def values(field, lo, hi):
    return set(range(lo, hi + 1)) if "*" in field else {int(v) for v in field}

def fires(c):
    start = datetime.fromisoformat(c["start"].replace("Z", "+00:00"))
    start = start.astimezone(ZoneInfo(c["tz"])).replace(tzinfo=None)
    minutes, hours, doms, months, dows = croniter(c["expr"], start).expanded[:5]
    minutes, hours = sorted(values(minutes, 0, 59)), sorted(values(hours, 0, 23))
    doms, months = values(doms, 1, 31), values(months, 1, 12)
    dows = {d % 7 for d in values(dows, 0, 6)}
    out = []
    day = start.date()
    while len(out) < c["n"] and day.year < start.year + 400:
        in_dom = day.day in doms
        in_dow = day.isoweekday() % 7 in dows
        if day.month in months and ((in_dom and in_dow) if c["and_days"] else (in_dom or in_dow)):
            for h in hours:
                for m in minutes:
                    t = datetime(day.year, day.month, day.day, h, m)
                    if t > start and len(out) < c["n"]:
                        out.append(t.strftime("%Y-%m-%dT%H:%M"))
        day += timedelta(days=1)
    return out

out = []
for c in json.load(sys.stdin):
    try:
        out.append(fires(c))
    except Exception as e:
        out.append({"error": type(e).__name__ + ": " + str(e)})
json.dump(out, sys.stdout)
`;
  const r = spawnSync("/usr/bin/python3", ["-c", script], {
    input: JSON.stringify(cases),
    encoding: "utf8",
    timeout: 60_000,
  });
  if (r.status !== 0 && /No module named 'croniter'/.test(r.stderr)) return null;
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

const wallFormats = new Map();
/** An instant as wall-clock time in tz: "2026-03-08T03:00". */
function wallTime(date, tz) {
  let f = wallFormats.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat("en-CA", {
      timeZone: tz,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
    });
    wallFormats.set(tz, f);
  }
  const p = Object.fromEntries(f.formatToParts(date).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}`;
}

const offsetFormats = new Map();
function utcOffset(ms, tz) {
  let f = offsetFormats.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat("en-US", { timeZone: tz, timeZoneName: "longOffset" });
    offsetFormats.set(tz, f);
  }
  return f.formatToParts(ms).find((p) => p.type === "timeZoneName").value;
}

/**
 * Wall-clock times near a clock change differ by design (the change skips or repeats them; how
 * cronvisor handles that is tested on its own below): both lists leave out times within two days
 * of one, and are cut at the earlier of their ends.
 */
function comparable(reference, times, tz) {
  const margin = 48 * 3600_000;
  const calm = (wall) => {
    const t = Date.parse(`${wall}:00Z`);
    return utcOffset(t - margin, tz) === utcOffset(t + margin, tz);
  };
  const end = [reference.at(-1), times.at(-1)].sort()[0];
  const keep = (list) => list.filter((w) => w <= end && calm(w));
  return [keep(reference), keep(times)];
}

const STARTS = ["2026-01-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-10-20T00:00:00Z"];

/** cron ANDs the day fields when either starts with `*` (entry.c DOM_STAR/DOW_STAR); macros too. */
const andDays = (fields) =>
  fields === null || fields[2].startsWith("*") || fields[4].startsWith("*");

/** The schedule part of a crontab line, as cron reads it. */
function cronSchedule(line) {
  const t = line.replace(/^[ \t]+/, "").replace(/^-/, "");
  if (t.startsWith("@")) return { expr: t.split(/[ \t]/)[0], fields: null };
  const fields = t.split(/[ \t]+/).slice(0, 5);
  return { expr: fields.join(" "), fields };
}

/** croner's next fire times for an imported schedule, as the daemon computes them. */
function cronerTimes(schedule, tz, start, n) {
  return new Cron(schedule, { mode: "5-or-6-parts", paused: true, timezone: tz }).nextRuns(
    n,
    new Date(start),
  );
}

test("every corpus schedule fires when croniter says cron fires it (UTC and New York)", (t) => {
  const cases = [];
  for (const { file, jobs } of CORPORA) {
    const lines = fixture(file).split("\n");
    const { data } = imported(fixture(file));
    for (const [name, expected] of Object.entries(jobs)) {
      if (expected.schedule === "@reboot") continue;
      const { expr, fields } = cronSchedule(lines[expected.line - 1]);
      const job = data.jobs[name];
      // A line without CRON_TZ ran in the host's zone: try two hosts, one with DST.
      const zones = expected.cron_tz ? [expected.cron_tz] : ["UTC", NY];
      for (const tz of zones) {
        for (const start of STARTS) {
          const zone = job.timezone ?? data.timezone ?? tz;
          const times = cronerTimes(job.schedule, zone, start, 20).map((d) => wallTime(d, tz));
          cases.push({ name, expr, tz, start, n: 20, and_days: andDays(fields), croner: times });
        }
      }
    }
  }
  const reference = croniter(cases.map(({ croner: _c, name: _n, ...c }) => c));
  // Skipped only without the independent reference; .ci/run installs python3-croniter.
  if (needsNow(t, reference === null && CRONITER_MISSING)) return;
  let compared = 0;
  cases.forEach((c, i) => {
    const ref = reference[i];
    assert.ok(Array.isArray(ref), `${c.name}: croniter: ${JSON.stringify(ref)}`);
    const [want, got] = comparable(ref, c.croner, c.tz);
    assert.ok(
      want.length >= 5,
      `${c.name} ${c.tz} ${c.start}: only ${want.length} comparable times`,
    );
    assert.deepEqual(got, want, `${c.name} (${c.expr}) in ${c.tz} from ${c.start}`);
    compared += want.length;
  });
  assert.ok(compared > 3000, `${compared} fire times compared`);
});

// croniter reads `1-31` as `*` and ANDs; cron ORs it with the day-of-week: every day.
test("a day field that selects every day without starting with * ORs: every day", () => {
  const { job } = onlyJob("0 5 1-31 * 1 /usr/local/bin/every-day-really\n");
  const days = cronerTimes(job.schedule, "UTC", "2026-01-01T00:00:00Z", 10);
  assert.deepEqual(
    days.map((d) => d.toISOString()),
    Array.from({ length: 10 }, (_, i) => `2026-01-${String(i + 1).padStart(2, "0")}T05:00:00.000Z`),
  );
});

/** A small deterministic PRNG, so a failure names a reproducible case. */
function prng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FIELD_SPECS = [
  { low: 0, high: 59 },
  { low: 0, high: 23 },
  { low: 1, high: 31 },
  {
    low: 1,
    high: 12,
    names: ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
  },
  { low: 0, high: 7, names: ["sun", "mon", "tue", "wed", "thu", "fri", "sat"] },
];

// A random crontab field: a star, a stepped star, a, a-b, a-b/s or a list; names in some.
function randomField(rand, spec) {
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  const useNames = spec.names && rand() < 0.3;
  const show = (v) => {
    if (!useNames || v >= spec.names.length + spec.low) return String(v);
    const n = spec.names[v - spec.low];
    return rand() < 0.5 ? n : n.toUpperCase();
  };
  const element = () => {
    const kind = int(0, 4);
    if (kind === 0) return "*";
    if (kind === 1) return `*/${int(1, spec.high + 3)}`;
    const a = int(spec.low, spec.high);
    if (kind === 2) return show(a);
    const b = int(a, spec.high);
    // A name for 7 reads as sun = 0, a backwards range: keep ranges with names below 7.
    const range = useNames && b > 6 && spec.high === 7 ? `${a}-${b}` : `${show(a)}-${show(b)}`;
    return kind === 3 ? range : `${range}/${int(1, spec.high)}`;
  };
  return Array.from({ length: rand() < 0.2 ? int(2, 3) : 1 }, element).join(",");
}

test("400 random schedules fire when croniter says cron fires them", (t) => {
  const rand = prng(20260101);
  const cases = [];
  let never = 0;
  let anded = 0; // day fields ANDed with croner's "+"
  let rewritten = 0; // fields written out as plain numbers
  for (let i = 0; i < 400; i++) {
    const fields = FIELD_SPECS.map((spec) => randomField(rand, spec));
    const expr = fields.join(" ");
    const r = importCrontab(`${expr} /bin/true\n`, { file: "random" });
    assert.deepEqual(r.errors, [], expr);
    const jobs = YAML.parse(r.yaml).jobs;
    if (Object.keys(jobs).length === 0) {
      // Never fires (`0 0 31 2 *`): left out with a warning, as cron never ran it either.
      assert.match(r.warnings[0], /never fires/);
      never++;
      continue;
    }
    const start = STARTS[i % STARTS.length];
    const tz = i % 2 ? NY : "UTC";
    const schedule = Object.values(jobs)[0].schedule;
    if (schedule.includes("+")) anded++;
    if (r.yaml.includes("schedule written out as")) rewritten++;
    const times = cronerTimes(schedule, tz, start, 20).map((d) => wallTime(d, tz));
    cases.push({ expr, tz, start, n: 20, and_days: andDays(fields), croner: times, schedule });
  }
  t.diagnostic(
    `${cases.length} compared, ${never} never fire, ${anded} with +, ${rewritten} rewritten`,
  );
  assert.ok(anded >= 10 && rewritten >= 10, "the random schedules exercise both rewrites");
  const reference = croniter(cases.map(({ croner: _c, schedule: _s, ...c }) => c));
  // Skipped only without the independent reference; .ci/run installs python3-croniter.
  if (needsNow(t, reference === null && CRONITER_MISSING)) return;
  assert.ok(never < 20, `${never} never-firing schedules`);
  cases.forEach((c, i) => {
    assert.ok(Array.isArray(reference[i]), `${c.expr}: croniter: ${JSON.stringify(reference[i])}`);
    const [want, got] = comparable(reference[i], c.croner, c.tz);
    assert.deepEqual(got, want, `${c.expr} -> ${c.schedule} in ${c.tz} from ${c.start}`);
  });
});

test("DST: a fixed-time job runs once on the nights New York changes its clocks", () => {
  const { job, yaml } = onlyJob("CRON_TZ=America/New_York\n30 2 * * * /usr/local/bin/nightly\n");
  assert.match(
    flat(yaml),
    /# DST: when the clocks change, 02:30 may not exist or may happen twice; cronvisor runs this job once either way/,
  );
  const iso = (dates) => dates.map((d) => d.toISOString());
  const spring = iso(cronerTimes(job.schedule, NY, "2026-03-07T12:00:00Z", 2));
  assert.deepEqual(spring, ["2026-03-08T07:00:00.000Z", "2026-03-09T06:30:00.000Z"]); // 03:00 EDT
  const { job: fall } = onlyJob("CRON_TZ=America/New_York\n30 1 * * * /usr/local/bin/nightly\n");
  const back = iso(cronerTimes(fall.schedule, NY, "2026-10-31T12:00:00Z", 2));
  assert.deepEqual(back, ["2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"]); // first 01:30 only
  // A zone without DST, and an hour no change touches, get no note.
  assert.doesNotMatch(onlyJob("CRON_TZ=Asia/Kolkata\n30 2 * * * x\n").yaml, /# DST/);
  assert.doesNotMatch(onlyJob("CRON_TZ=Europe/Berlin\n30 1 * * * x\n").yaml, /# DST/);
});

// ---------------------------------------------------------------------------------------------
// Commands: `%`, wrappers, prefixes

/** Run a command as cronvisor will: `/bin/sh -c COMMAND`, with an empty stdin. */
function sh(command) {
  const r = spawnSync("/bin/sh", ["-c", command], { input: "", encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test("%: the imported command feeds exactly the stdin cron fed (run in /bin/sh)", () => {
  // [crontab command, what cron wrote to the command's stdin per do_command.c, or the output]
  const cases = [
    ["cat%line one%line two", "line one\nline two\n"],
    ["cat%a\\%b%%c%", "a%b\n\nc\n"], // \% is %, the last % is the final newline
    ["cat%trailing backslash\\", "trailing backslash\\\n"],
    ["cat%\\", "\\"], // nothing but a backslash: no newline added
    ['cat%it\'s "quoted" $HOME `x` \\n%', 'it\'s "quoted" $HOME `x` \\n\n'],
    ["tr a-z A-Z%x%   ", "X\n   \n"], // blanks at the end of stdin are data
    ["cat; echo after%in", "in\nafter\n"], // a list: all of it reads the stdin
    ["cat # comment%in", "in\n"],
    ["echo 50\\%%ignored", "50%\n"], // \% before the first % is a literal %
    ["cat%", ""], // an empty rest: no stdin at all
    ["cat | tr a-z A-Z%piped", "PIPED\n"],
  ];
  for (const [command, output] of cases) {
    const { job } = onlyJob(`* * * * * ${command}\n`);
    assert.equal(sh(job.command), output, `${command} -> ${job.command}`);
  }
});

test("wrappers: flock -n, chronic and timeout become settings; what remains is the rest of the line", () => {
  const cases = [
    ["flock -n /tmp/a.lock cmd --x", { command: "cmd --x", overlap: "skip" }],
    ["flock -xn /tmp/a.lock cmd", { command: "cmd", overlap: "skip" }],
    ["flock -n -x /tmp/a.lock cmd", { command: "cmd", overlap: "skip" }],
    ["/usr/bin/flock --nonblock --exclusive /tmp/a.lock cmd", { command: "cmd", overlap: "skip" }],
    ["flock -n -E 0 /tmp/a.lock cmd", { command: "cmd", overlap: "skip" }],
    ["flock -n /tmp/a.lock -c 'a; b \"c\"'", { command: 'a; b "c"', overlap: "skip" }],
    ["flock -n /tmp/a.lock --command 'it'\\''s'", { command: "it's", overlap: "skip" }],
    [
      "flock -n /tmp/a.lock cmd > /tmp/out 2>&1",
      { command: "cmd > /tmp/out 2>&1", overlap: "skip" },
    ],
    ["chronic cmd", { command: "cmd" }],
    ["chronic -ev cmd a b", { command: "cmd a b" }],
    ["chronic cmd1 && cmd2", { command: "cmd1 && cmd2" }],
    ["timeout 90 cmd", { command: "cmd", timeout: "90s" }],
    ["timeout 1.5h cmd", { command: "cmd", timeout: "90m" }],
    ["timeout 0.25 cmd", { command: "cmd", timeout: "250ms" }],
    ["timeout 2d cmd", { command: "cmd", timeout: "2d" }],
    [
      "timeout --signal=INT --kill-after=5s 2m cmd",
      { command: "cmd", timeout: "2m", kill_grace: "5s" },
    ],
    ["timeout -sKILL -k1m 10m cmd", { command: "cmd", timeout: "10m", kill_grace: "1m" }],
    ["/usr/bin/timeout --foreground --preserve-status 30 cmd", { command: "cmd", timeout: "30s" }],
    ["timeout 0 cmd", { command: "cmd" }],
    ["timeout 60 flock -n /l chronic cmd", { command: "cmd", overlap: "skip", timeout: "1m" }],
    [
      "chronic flock -n /tmp/x.lock timeout 60 cmd",
      { command: "cmd", overlap: "skip", timeout: "1m" },
    ],
    // Left in place, each with the reason in a comment:
    ["flock /tmp/a.lock cmd", { command: "flock /tmp/a.lock cmd" }],
    ["flock -w 10 /tmp/a.lock cmd", { command: "flock -w 10 /tmp/a.lock cmd" }],
    ["flock -s -n /tmp/a.lock cmd", { command: "flock -s -n /tmp/a.lock cmd" }],
    ['flock -n "$LOCK" cmd', { command: 'flock -n "$LOCK" cmd' }],
    ["flock -n /tmp/a.lock cmd1 && cmd2", { command: "flock -n /tmp/a.lock cmd1 && cmd2" }],
    ['flock -n /tmp/a.lock -c "echo $X"', { command: 'flock -n /tmp/a.lock -c "echo $X"' }],
    ["timeout 30 cmd | logger", { command: "timeout 30 cmd | logger" }],
    ["timeout 0.0001 cmd", { command: "timeout 0.0001 cmd" }],
    ["timeout 30", { command: "timeout 30" }],
  ];
  for (const [command, expected] of cases) {
    const { job, yaml } = onlyJob(`* * * * * ${command}\n`);
    assert.deepEqual(job, { schedule: "* * * * *", ...expected }, `${command}\n${yaml}`);
    if (
      job.command === command &&
      /^(\/usr\/bin\/)?(flock|timeout) /.test(command) &&
      command !== "timeout 30"
    ) {
      assert.match(yaml, /# kept `(flock|timeout)/, command);
    }
  }
});

test("wrapper comments say what was removed and what differs", () => {
  const yaml = flat(
    onlyJob("* * * * * chronic flock -n /tmp/x.lock timeout -s KILL 60 cmd\n").yaml,
  );
  const notes = yaml.split("\n").filter((l) => l.startsWith("  # "));
  assert.deepEqual(notes, [
    "  # line 1: * * * * * chronic flock -n /tmp/x.lock timeout -s KILL 60 cmd",
    "  # removed `chronic`: cronvisor keeps every run's output in its log and alerts on failure (alerts:)",
    "  # removed `flock -n /tmp/x.lock`: overlap: skip does the same for this job (a slot that finds the previous run still going is skipped and recorded). If anything outside this crontab also locks /tmp/x.lock, put the flock back",
    "  # removed `timeout -s KILL 60`: timeout(1) sent SIGKILL at once; cronvisor sends SIGTERM first and SIGKILL after kill_grace (to the whole process group)",
  ]);
});

test("cronie's - prefix is dropped, with a comment", () => {
  const { job, yaml } = onlyJob("-*/5 * * * * /usr/local/bin/noisy\n");
  assert.deepEqual(job, { schedule: "*/5 * * * *", command: "/usr/local/bin/noisy" });
  assert.match(yaml, /# removed cronie's "-" prefix \(don't syslog this job\)/);
});

test("job names: readable, valid and unique", () => {
  const { data } = imported(
    [
      "* * * * * /usr/local/bin/backup.sh --full",
      "* * * * * /usr/local/bin/backup.sh --incremental",
      "* * * * * BACKUP_DIR=/srv nice -n 19 ionice -c3 /opt/Backup.Tool.py",
      "* * * * * cd /srv/app && python3 manage.py clearsessions",
      "* * * * * python3 -m app.tasks.cleanup",
      "* * * * * sudo -u deploy /srv/deploy/bin/pull",
      "* * * * * bash -c 'cd /x && ./run-me.sh'",
      "* * * * * npm run build --prefix /srv/web",
      "* * * * * $HOME/bin/daily.job >> $HOME/tmp/out 2>&1",
      "* * * * * /usr/local/bin/Ünïcödé",
      "* * * * * /usr/local/bin/" + "x".repeat(80),
      "* * * * * /usr/local/bin/" + "x".repeat(80),
      "* * * * * :",
    ].join("\n") + "\n",
  );
  assert.deepEqual(Object.keys(data.jobs), [
    "backup",
    "backup-2",
    "backup.tool",
    "manage-clearsessions",
    "app.tasks.cleanup",
    "pull",
    "run-me",
    "npm-build",
    "daily.job",
    "n-c-d",
    "x".repeat(64),
    "x".repeat(62) + "-2",
    "job",
  ]);
  for (const name of Object.keys(data.jobs)) assert.match(name, /^[a-z0-9][a-z0-9_.-]{0,63}$/);
});

// ---------------------------------------------------------------------------------------------
// Environment lines

test("variables: SHELL, PATH/HOME/others, CRON_TZ, MAILTO and RANDOM_DELAY, in force per line", () => {
  const { data, yaml, warnings } = imported(
    [
      'SHELL = "/bin/bash"',
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "CRON_TZ=Europe/Berlin",
      "MAILTO=ops@example.com",
      "GREETING = ' hello world '",
      "EMPTY=",
      "LITERAL=$HOME/bin",
      "0 1 * * * first",
      "PATH=/opt/bin:/usr/bin",
      "CRON_TZ=America/New_York",
      "MAILTO=",
      "RANDOM_DELAY=5",
      "0 2 * * * second",
      "SHELL=/bin/zsh",
      "0 3 * * * third",
      "0 4 * * * echo $MAILTO",
    ].join("\n") + "\n",
  );
  assert.equal(data.shell, "/bin/bash");
  assert.equal(data.timezone, "Europe/Berlin");
  assert.deepEqual(data.env, {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    MAILTO: "ops@example.com", // a command reads $MAILTO, so it stays in the environment
    GREETING: " hello world ",
    EMPTY: "",
    LITERAL: "$HOME/bin",
  });
  assert.deepEqual(data.jobs.first, { schedule: "0 1 * * *", command: "first" });
  const later = { timezone: NY, env: { PATH: "/opt/bin:/usr/bin", MAILTO: "" }, jitter: "5m" };
  assert.deepEqual(data.jobs.second, { schedule: "0 2 * * *", command: "second", ...later });
  // SHELL changed after the first job: the top-level shell stays; this job names its own.
  assert.deepEqual(data.jobs.third, {
    schedule: "0 3 * * *",
    command: ["/bin/zsh", "-c", "third"],
    ...later,
  });
  assert.match(yaml, /^# MAILTO=ops@example.com: cron mailed job output there/m);
  assert.match(yaml, /# MAILTO="": cron mailed nothing/);
  assert.match(flat(yaml), /# RANDOM_DELAY=5 \(line 12\): cronie delayed every job by one random/);
  assert.deepEqual(warnings, [
    'line 7: cron does not expand variables in "LITERAL=$HOME/bin"; the value is copied as written',
  ]);
});

test("TZ sets the schedule's zone (and stays in the job's environment), with a comment", () => {
  const { data, yaml } = imported("TZ=Europe/London\n0 9 * * * report\n");
  assert.equal(data.timezone, "Europe/London");
  assert.deepEqual(data.env, { TZ: "Europe/London" });
  assert.match(
    flat(yaml),
    /# TZ=Europe\/London \(line 1\) is used as the schedule's time zone; cronie schedules by CRON_TZ only/,
  );
});

// ---------------------------------------------------------------------------------------------
// Formats

test("format: forced, from the path, from the user column, or a user crontab with a warning", () => {
  const systemLine = "0 * * * * root /usr/bin/true\n";
  const forced = importCrontab("0 * * * * deploy /srv/bin/pull\n", { file: "x", system: true });
  assert.match(forced.yaml, /detected because --system was given/);
  assert.equal(YAML.parse(forced.yaml).jobs.pull.user, "deploy");
  const cronD = importCrontab("0 * * * * deploy /srv/bin/pull\n", { file: "/etc/cron.d/app" });
  assert.match(cronD.yaml, /detected because the file is \/etc\/cron\.d\/app/);
  assert.match(importCrontab(systemLine, { file: "x" }).yaml, /format: system crontab/);
  const ambiguous = importCrontab("0 * * * * deploy /srv/bin/pull\n", { file: "x" });
  assert.match(ambiguous.yaml, /format: user crontab .* no job line names a well-known user/);
  assert.deepEqual(YAML.parse(ambiguous.yaml).jobs.deploy.command, "deploy /srv/bin/pull");
  assert.match(
    ambiguous.warnings[0],
    /could be a user name: if this is a system crontab, import it with --system/,
  );
});

// ---------------------------------------------------------------------------------------------
// Lines that cannot be imported

const BAD_LINES = [
  ["61 * * * * x", 'bad minute "61": 61 is out of range 0-59'],
  [
    "0 0 * * mon-sun x",
    'bad day-of-week "mon-sun": range mon-sun runs backwards (cron rejects it; write it as a list)',
  ],
  [
    "5/2 * * * * x",
    'bad minute "5/2": "5/2" means different things to different crons; write 5-59/2 or 5',
  ],
  [
    "@Daily x",
    'unknown time specifier "@Daily" (cron knows @reboot @yearly @annually @monthly @weekly @daily @midnight @hourly, in lower case)',
  ],
  ["* * * * * * x", 'a "*" where the command should start: cron has five time fields, not six'],
  [
    "0 0 * * sunday x",
    'bad day-of-week "sunday": unknown name "sunday" (cron takes the first three letters only)',
  ],
  ["0 0 L * * x", 'bad day-of-month "L": "L": L, W, # and ? are not crontab syntax'],
  ["0 0 * * 1#2 x", 'bad day-of-week "1#2": "1#2": L, W, # and ? are not crontab syntax'],
  ["*/0 * * * * x", 'bad minute "*/0": step "0" must be a whole number above 0'],
  [
    "export PATH=/x",
    'expected five time fields and a command, or NAME=value (write "NAME=value" without "export")',
  ],
  ["* * * *", "expected five time fields and a command, or NAME=value"],
  ["* * * * *", "no command after the time fields"],
  ["* * * * * %stdin only", 'the command is empty before the first "%"'],
  [
    "CRON_TZ=Mars/Olympus",
    "CRON_TZ=Mars/Olympus is not a time zone cronvisor knows (an IANA name such as Europe/Berlin)",
  ],
];

test("a line that cannot be imported is an error naming its line", () => {
  const text =
    ["# header", ...BAD_LINES.flatMap(([l]) => [l, "*/5 * * * * fine"])].join("\n") + "\n";
  const r = importCrontab(text, { file: "bad" });
  assert.deepEqual(
    r.errors,
    BAD_LINES.map(([, message], i) => ({
      line: 2 + 2 * i,
      message: `line ${2 + 2 * i}: ${message}`,
    })),
  );
});

test("--skip-invalid: the line becomes a comment and a warning; the rest imports", () => {
  const text = "0 * * * * ok\n61 * * * * broken\n0 0 30 2 * never\n0 1 * * * also-ok\n";
  const r = importCrontab(text, { file: "bad", skipInvalid: true });
  assert.deepEqual(r.errors, []);
  assert.deepEqual(r.warnings, [
    'line 2: bad minute "61": 61 is out of range 0-59; skipped',
    'line 3: "0 0 30 2 *" never fires (no such date), under cron either; left out as a comment',
  ]);
  assert.deepEqual(Object.keys(YAML.parse(r.yaml).jobs), ["ok", "also-ok"]);
  assert.match(
    r.yaml,
    /# line 2 \(skipped, cannot import: bad minute "61": 61 is out of range 0-59\): 61 \* \* \* \* broken/,
  );
  assert.match(r.yaml, /# line 3 \(never fires, left out\): 0 0 30 2 \* never/);
});

test("warnings: a command cut by an unescaped %, CRLF, an unusable variable name", () => {
  const cut = importCrontab("0 0 * * * tar czf /b/$(date +%F).tgz /home\n", { file: "x" });
  assert.match(
    cut.warnings[0],
    /^line 1: the command has an unterminated quote or substitution after cutting it at the first "%"/,
  );
  const crlf = imported("PATH=/bin\r\n0 0 * * * run\r\n");
  assert.equal(crlf.data.jobs.run.command, "run");
  assert.equal(crlf.data.env.PATH, "/bin");
  assert.match(crlf.warnings[0], /CRLF/);
  const name = imported('"MY VAR" = x\n0 0 * * * run\n');
  assert.equal(name.data.env, undefined);
  assert.deepEqual(name.warnings, [
    'line 1: "MY VAR" cannot be an env: name in cronvisor (letters, digits and _); not imported',
  ]);
  // Control characters cannot be in a YAML comment: they are shown escaped.
  const bell = imported("# ring \x07\n0 0 * * * printf '\x07'\n");
  assert.match(bell.yaml, /# ring \\x07\n/);
  assert.equal(bell.data.jobs.printf.command, "printf '\x07'");
});

test("an empty crontab is an empty jobs map", () => {
  const { data } = imported("# nothing here\n\n");
  assert.deepEqual(data.jobs, {});
});

test("a line that ends in `&` keeps what it starts running (leftovers: keep); `&&` is not that", () => {
  const bg = onlyJob("*/5 * * * * /usr/local/bin/start-worker.sh &\n");
  assert.equal(bg.job.leftovers, "keep");
  assert.match(bg.yaml, /leftovers: keep: the line ends in `&`/);
  const and = onlyJob("0 2 * * * a && b\n");
  assert.equal(and.job.leftovers, undefined);
});

// The host zone without ICU (issue 16, idle RSS): TZ and /etc read as glibc reads them, UTC
// computed without Intl, and the answer the same as Intl's wherever Intl has one.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { Cron } from "croner";
import { hostZoneName, isUtcZone } from "../dist/schedule/host-zone.js";
import { nextSlotAt, prevSlotAt } from "../dist/schedule/schedule.js";
import { offsetAt, localInstants } from "../dist/schedule/zone.js";
import { CRON_OPTIONS } from "../dist/schedule/cron-options.js";
import {
  ROOT,
  cleanEnv,
  cli,
  startDaemon,
  stopDaemon,
  tmpdir,
  waitFor,
  writeConfig,
} from "./helpers.js";
import { needsNow } from "./needs.js";

const PROBE = path.join(ROOT, "test", "fixtures", "zone", "intl-probe.mjs");
const HOST_ZONE = path.join(ROOT, "dist", "schedule", "host-zone.js");

/**
 * In a child node with `env` (TZ set or deleted): hostZone()'s answer, whether it touched Intl,
 * then Intl's own answer. `wrap` runs the child inside another command (a mount namespace).
 */
function childZones(tz, wrap = []) {
  const script = `
    const { hostZone } = await import(${JSON.stringify(HOST_ZONE)});
    const fs = await import("node:fs");
    const mine = hostZone();
    const touched = fs.existsSync(process.env.INTL_PROBE_OUT);
    const intl = Intl.DateTimeFormat().resolvedOptions().timeZone;
    console.log(JSON.stringify({ mine, touched, intl: intl ?? null }));
  `;
  const out = path.join(fs.mkdtempSync("/tmp/cvx-zone-"), "probe");
  const env = cleanEnv({ INTL_PROBE_OUT: out });
  if (tz === undefined) delete env.TZ;
  else env.TZ = tz;
  const argv = [process.execPath, "--import", PROBE, "--input-type=module", "-e", script];
  const [cmd, ...args] = [...wrap, ...argv];
  const r = spawnSync(cmd, args, { env, encoding: "utf8", timeout: 30_000 });
  fs.rmSync(path.dirname(out), { recursive: true, force: true });
  assert.equal(r.status, 0, `TZ=${tz}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** Intl's own answer is a zone (not undefined, not "Etc/Unknown", its word for none). */
const isZone = (z) => typeof z === "string" && z !== "Etc/Unknown";

// [TZ, the zone, how Intl's own answer relates]. "same": Intl says the same zone; "none": Intl
// has no zone for it (undefined or Etc/Unknown) and glibc's reading is taken; "etc": a POSIX rule,
// which ICU skips for /etc's zone (or for none: it depends on the host), and the daemon takes as
// UTC (README: a TZ that names no zone is UTC). A name of UTC, or an empty TZ, must be answered without Intl; a name Intl may know
// (Foo/Bar, UTC0) is asked of Intl first.
const TZ_TABLE = [
  ["UTC", "UTC", "same"],
  [":UTC", "UTC", "same"],
  ["Etc/UTC", "UTC", "same"],
  [":Etc/UTC", "UTC", "same"],
  ["UCT", "UTC", "same"],
  ["GMT", "UTC", "same"],
  ["Etc/GMT", "UTC", "same"],
  ["GMT0", "UTC", "same"],
  ["GMT-0", "UTC", "same"],
  ["Zulu", "UTC", "same"],
  ["Etc/Universal", "UTC", "same"],
  ["Etc/Greenwich", "UTC", "same"],
  ["posix/UTC", "UTC", "same"],
  ["", "UTC", "none"],
  [":", "UTC", "none"],
  ["utc", "UTC", "none"],
  ["Europe/Berlin", "Europe/Berlin", "same"],
  [":Europe/Berlin", "Europe/Berlin", "same"],
  ["posix/Europe/Berlin", "Europe/Berlin", "same"],
  ["right/Europe/Berlin", "Europe/Berlin", "same"],
  ["Asia/Kolkata", "Asia/Calcutta", "same"],
  ["US/Eastern", "America/New_York", "same"],
  ["EST5EDT", "America/New_York", "same"],
  ["/usr/share/zoneinfo/Europe/Berlin", "Europe/Berlin", "none"],
  [":/usr/share/zoneinfo/Asia/Tokyo", "Asia/Tokyo", "none"],
  ["Foo/Bar", "UTC", "none"],
  ["UTC0", "UTC", "etc"],
  ["CET-1CEST", "UTC", "etc"],
];

test("host zone from TZ: the zone Intl names, UTC without Intl, no crash on a bad TZ", () => {
  for (const [tz, zone, relation] of TZ_TABLE) {
    const r = childZones(tz);
    const what = `TZ=${JSON.stringify(tz)}: ${JSON.stringify(r)}`;
    assert.equal(r.mine, zone, what);
    if (relation === "same") assert.equal(r.intl, zone, what);
    if (relation === "none") assert.ok(!isZone(r.intl), `Intl now has a zone: ${what}`);
    const utcName = /^:?(posix\/)?(Etc\/)?(UTC|UCT|GMT0?|GMT-0|Zulu|Universal|Greenwich|utc)?$/;
    if (utcName.test(tz)) assert.equal(r.touched, false, what);
  }
});

/** A directory standing for /etc: every entry of the real one but localtime and timezone. */
function fakeEtc(t, localtime, timezone) {
  const dir = tmpdir(t, "cvx-etc-");
  if (localtime?.link) fs.symlinkSync(localtime.link, path.join(dir, "localtime"));
  if (localtime?.copy) fs.copyFileSync(localtime.copy, path.join(dir, "localtime"));
  if (timezone !== undefined) fs.writeFileSync(path.join(dir, "timezone"), timezone);
  return dir;
}

const ZI = "/usr/share/zoneinfo";
// [what, /etc/localtime, /etc/timezone, hostZoneName's answer (null: only Intl can say)]
const ETC_TABLE = [
  ["a link into zoneinfo", { link: `${ZI}/Europe/Berlin` }, undefined, "Europe/Berlin"],
  ["a relative link", { link: `../usr/share/zoneinfo/Asia/Kolkata` }, undefined, "Asia/Kolkata"],
  ["a link to posix/", { link: `${ZI}/posix/America/New_York` }, undefined, "America/New_York"],
  ["a link to UTC", { link: `${ZI}/Etc/UTC` }, "Europe/Paris\n", "Etc/UTC"],
  ["a copy, with /etc/timezone", { copy: `${ZI}/Asia/Tokyo` }, "Asia/Tokyo\n", "Asia/Tokyo"],
  ["a copy, /etc/timezone empty", { copy: `${ZI}/Asia/Tokyo` }, "\n", null],
  ["a copy, no /etc/timezone", { copy: `${ZI}/Asia/Tokyo` }, undefined, null],
  ["no /etc/localtime", undefined, "Europe/Paris\n", "UTC"],
];

test("host zone from /etc: the localtime link, else /etc/timezone beside a copy, else UTC", (t) => {
  for (const [what, localtime, timezone, name] of ETC_TABLE) {
    const etc = fakeEtc(t, localtime, timezone);
    assert.equal(hostZoneName(undefined, etc), name, what);
    // TZ, when set, wins over the files; TZ naming the localtime file reads it.
    assert.equal(hostZoneName("Europe/Lisbon", etc), "Europe/Lisbon", what);
    assert.equal(hostZoneName(path.join(etc, "localtime"), etc), name, what);
  }
});

/** Can this process run a child under its own /etc (root, and mount namespaces allowed)? */
function namespaceWrap() {
  if (process.getuid() !== 0) return null;
  const r = spawnSync("unshare", ["-m", "true"], { encoding: "utf8" });
  return r.status === 0 ? ["unshare", "-m", "sh", "-c"] : null;
}

test("host zone from /etc: the same as Intl's under a fake /etc (mount namespace)", (t) => {
  const wrap = namespaceWrap();
  // Skipped only without root or mount namespaces; in CI, as root, never.
  if (needsNow(t, !wrap && "needs root and unshare -m to give a child its own /etc")) return;
  for (const [what, localtime, timezone] of ETC_TABLE) {
    // The fake /etc holds links to every real entry (through a second mount of the real /etc, so
    // that /etc/ssl and the rest still resolve) but localtime and timezone.
    const etc = fakeEtc(t, localtime, timezone);
    const real = tmpdir(t, "cvx-realetc-");
    for (const e of fs.readdirSync("/etc"))
      if (e !== "localtime" && e !== "timezone")
        fs.symlinkSync(path.join(real, e), path.join(etc, e));
    const mount = `mount --make-rprivate / && mount --bind /etc ${real} && mount --bind ${etc} /etc && exec "$0" "$@"`;
    const r = childZones(undefined, [...wrap, mount]);
    const line = `${what}: ${JSON.stringify(r)}`;
    t.diagnostic(line);
    if (isZone(r.intl)) assert.equal(r.mine, r.intl, line);
    else assert.equal(r.mine, "UTC", line);
    if (r.mine === "UTC") assert.equal(r.touched, false, line);
  }
});

test("every name isUtcZone takes is UTC to Intl, and no other zone is", () => {
  const names = ["UTC", "UCT", "GMT", "GMT0", "GMT+0", "GMT-0", "Universal", "Zulu", "Greenwich"];
  for (const n of names.flatMap((x) => [x, `Etc/${x}`, x.toLowerCase()])) {
    assert.equal(isUtcZone(n), true, n);
    const f = new Intl.DateTimeFormat("en-US", { timeZone: n });
    assert.equal(f.resolvedOptions().timeZone, "UTC", n);
  }
  for (const n of ["Etc/GMT+1", "Etc/GMT-0 ", "Europe/London", "WET", "Africa/Abidjan", "Iceland"])
    assert.equal(isUtcZone(n), false, n);
});

// A small deterministic walk over two years of instants, with odd milliseconds.
function* instants(n) {
  let x = 12345;
  let t = Date.UTC(2023, 11, 31, 23, 59, 59, 500);
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    t += (x % 4_000_000_000) / 50 + 1;
    yield Math.floor(t);
  }
}

test("UTC slots by arithmetic equal croner's through Intl with timezone UTC", () => {
  const patterns = [
    "0 * * * *",
    "*/7 3-5 * * 1-5",
    "0 0 29 2 *",
    "0 0 L * *",
    "0 12 * * 5#2",
    "30 2 * * 0",
    "*/13 * * * * *",
    "0 0 1,15 * 3",
    "59 23 31 12 *",
  ];
  for (const pattern of patterns) {
    const intl = new Cron(pattern, { ...CRON_OPTIONS, timezone: "UTC", paused: true });
    for (const zone of ["UTC", "Etc/UTC"]) {
      const job = { pattern, timezone: zone };
      for (const t of instants(300)) {
        const what = `${pattern} ${zone} after ${new Date(t).toISOString()}`;
        assert.equal(nextSlotAt(job, t), intl.nextRun(new Date(t))?.getTime() ?? null, what);
        assert.equal(
          prevSlotAt(job, t),
          intl.previousRuns(1, new Date(t))[0]?.getTime() ?? null,
          what,
        );
      }
    }
  }
  for (const t of instants(50)) {
    assert.equal(offsetAt(t, "UTC"), 0);
    const d = new Date(t);
    const wall = {
      year: d.getUTCFullYear(),
      month: d.getUTCMonth() + 1,
      day: d.getUTCDate(),
      hour: d.getUTCHours(),
      minute: d.getUTCMinutes(),
      second: d.getUTCSeconds(),
      ms: d.getUTCMilliseconds(),
    };
    assert.deepEqual(localInstants(wall, "Etc/UTC"), [t]);
  }
});

/** Run a daemon under the Intl probe until it started and reloaded; the probe's record, or null. */
async function daemonIntlUse(t, top) {
  const dir = tmpdir(t);
  let yaml = `state_dir: ${path.join(dir, "state")}\n${top}jobs:\n`;
  for (let i = 0; i < 20; i++) yaml += `  j${i}: { schedule: "${i} * * * *", command: "true" }\n`;
  const file = writeConfig(dir, yaml);
  const out = path.join(dir, "intl-probe");
  const env = { TZ: "Etc/UTC", NODE_OPTIONS: `--import ${PROBE}`, INTL_PROBE_OUT: out };
  const d = startDaemon(t, file, env);
  await waitFor(() => /daemon \d+ started/.test(d.err), `the daemon to start: ${d.err}`);
  d.kill("SIGHUP");
  await waitFor(() => /config reloaded/.test(d.err), `the reload: ${d.err}`);
  await stopDaemon(d);
  return fs.existsSync(out) ? fs.readFileSync(out, "utf8") : null;
}

test("a UTC daemon (host zone UTC, or timezone: Etc/UTC) never touches Intl; a Berlin one does", async (t) => {
  assert.equal(await daemonIntlUse(t, ""), null);
  assert.equal(await daemonIntlUse(t, "timezone: Etc/UTC\n"), null);
  assert.notEqual(await daemonIntlUse(t, "timezone: Europe/Berlin\n"), null);
});

test("an empty or unknown TZ is UTC to the CLI: `next` answers instead of failing with a stack", (t) => {
  const dir = tmpdir(t);
  const file = writeConfig(dir, `jobs:\n  a: { schedule: "0 3 * * *", command: "true" }\n`);
  for (const tz of ["", "Foo/Bar", ":"]) {
    const r = cli(["next", "-c", file], { env: { TZ: tz } });
    assert.equal(r.code, 0, `TZ=${JSON.stringify(tz)}: ${r.stderr}`);
    assert.match(r.stdout, /03:00:00.000Z/, r.stdout);
    assert.doesNotMatch(r.stdout + r.stderr, /Etc\/Unknown|undefined/);
  }
});

test("distinct patterns cost under 8 KB of heap each: croner's year table is shared", (t) => {
  // In a child with --expose-gc, so the heap is measured after full collections. Half the
  // patterns in UTC, half in Europe/Berlin; the slots must match a fresh croner object's.
  const script = `
    const { nextSlotAt } = await import(${JSON.stringify(path.join(ROOT, "dist", "schedule", "schedule.js"))});
    const { Cron } = await import("croner");
    const jobs = [];
    for (let h = 0; h < 24; h++) for (let m = 0; m < 20; m++)
      jobs.push({ pattern: m + " " + h + " * * " + (m % 7), timezone: m % 2 ? "UTC" : "Europe/Berlin" });
    nextSlotAt(jobs[0], 0);
    gc(); gc();
    const before = process.memoryUsage().heapUsed;
    const t = Date.UTC(2026, 2, 29, 0, 30);
    const got = jobs.map((j) => nextSlotAt(j, t));
    gc(); gc();
    const perPattern = (process.memoryUsage().heapUsed - before) / jobs.length;
    const want = jobs.map((j) => new Cron(j.pattern, { timezone: j.timezone, paused: true, mode: "5-or-6-parts", domAndDow: false }).nextRun(new Date(t)).getTime());
    console.log(JSON.stringify({ perPattern, same: JSON.stringify(got) === JSON.stringify(want) }));
  `;
  const r = spawnSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", script], {
    encoding: "utf8",
    cwd: ROOT,
  });
  assert.equal(r.status, 0, r.stderr);
  const { perPattern, same } = JSON.parse(r.stdout);
  assert.ok(same, "slots differ from croner's own");
  t.diagnostic(`${perPattern.toFixed(0)} bytes per pattern`);
  assert.ok(perPattern < 8192, `${perPattern.toFixed(0)} bytes per pattern`);
});

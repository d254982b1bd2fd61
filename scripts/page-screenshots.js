// Takes the README's screenshots of the status page, light and dark, into docs/:
//   npm run build && node scripts/page-screenshots.js
// A real daemon serves the page. Its store is first given a day of history by bulk insert (as
// bench/rows.js fillStore does: a picture needs a day that a script cannot wait for): runs, some
// failed, slots skipped by overlap and missed while the daemon was down. Then the daemon runs a
// job that gets stuck. Chromium is Debian's (/usr/bin/chromium), driven by playwright-core.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { chromium } from "playwright-core";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { openStore } = await import(path.join(ROOT, "dist", "store", "store.js"));
const PORT = 19464 + Math.floor(Math.random() * 500);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cvx-shots-"));
const state = path.join(dir, "state");
const MIN = 60_000;
const HOUR = 60 * MIN;
const now = Date.now();

fs.writeFileSync(
  path.join(dir, "jobs.yaml"),
  `state_dir: ./state
timezone: Europe/Berlin
heartbeat: 2s
http: 127.0.0.1:${PORT}
jobs:
  sync-crm:
    schedule: "@reboot"
    command: sleep 600
    health: { progress_within: 3s }
  upload-attachments:
    schedule: "*/30 * * * *"
    command: /usr/local/bin/upload
  report:
    schedule: "0 * * * *"
    command: /usr/local/bin/report
  enrich:
    schedule: "*/15 * * * *"
    command: /usr/local/bin/enrich
  backup:
    schedule: "0 2 * * *"
    command: /usr/local/bin/backup
  cleanup:
    schedule: "30 4 * * *"
    command: /usr/local/bin/cleanup
    paused: true
`,
);

// ---- a day of history ------------------------------------------------------------------------

await (await openStore(state, { create: true })).close();
const db = new Database(path.join(state, "cronvisor.db"));
const insRun = db.prepare(`INSERT INTO runs (job, slot, trigger, status, reason, exit_code, attempt,
  started_at, finished_at, duration_ms, fence, log_path, markers_new, markers_skipped)
  VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, 1, NULL, ?, ?)`);
const insSlot = db.prepare("INSERT OR IGNORE INTO slots (job, slot, run_id) VALUES (?, ?, ?)");
const insJob = db.prepare(`INSERT INTO jobs (name, paused, fence, scanned_to, last_success_at,
  last_progress_at, first_seen_at) VALUES (?, 0, 1, ?, ?, ?, ?)`);
const lastOk = new Map();
/** A run of `job` for `slot` that took `ms`, or a disposition (`skipped`, `missed`). */
function record(job, slot, status, ms = 0, reason = null, markers = [0, 0]) {
  const disposition = status === "skipped" || status === "missed";
  // A missed slot is recorded when the daemon is back; a skipped one at the slot.
  const start = status === "missed" ? UP_AGAIN : disposition ? slot : slot + 40;
  const exit = disposition ? null : status === "ok" ? 0 : 1;
  const id = insRun.run(
    job,
    slot,
    "schedule",
    status,
    reason,
    exit,
    start,
    start + ms,
    ms,
    ...markers,
  ).lastInsertRowid;
  insSlot.run(job, slot, disposition ? null : id);
  if (status === "ok") lastOk.set(job, start + ms);
  return id;
}
/** fn(slot) for every `step` (UTC, offset by `from`) in the last 24 hours. */
const every = (step, from, fn) => {
  const first = Math.ceil((now - 24 * HOUR - from) / step) * step + from;
  for (let t = first; t < now - MIN; t += step) fn(t);
};
// The daemon was down for 95 minutes, 9 to 7.5 hours ago: its slots then are missed.
const UP_AGAIN = now - 7.5 * HOUR;
const down = (t) => t > now - 9 * HOUR && t < UP_AGAIN;
const skipped = new Set();
db.transaction(() => {
  every(30 * MIN, 0, (t) => {
    if (down(t)) return record("upload-attachments", t, "missed", 0, "daemon down");
    const late = t > now - 2 * HOUR;
    record(
      "upload-attachments",
      t,
      late ? "failed" : "ok",
      20_000 + (t % 7) * 1000,
      late ? "exit 1" : null,
      [late ? 0 : 12, 3],
    );
  });
  every(HOUR, 0, (t) => {
    if (skipped.has(t)) return;
    if (down(t)) return record("report", t, "missed", 0, "daemon down");
    const slow = Math.floor(t / HOUR) % 6 === 0 && t + HOUR < now - MIN;
    const id = record("report", t, "ok", slow ? 80 * MIN : 8 * MIN + ((t / MIN) % 5) * MIN);
    if (!slow) return;
    record("report", t + HOUR, "skipped", 0, `overlap: run ${id} holds the lock`);
    skipped.add(t + HOUR);
  });
  every(15 * MIN, 0, (t) => {
    if (down(t)) return record("enrich", t, "missed", 0, "daemon down");
    const failed = Math.floor(t / (15 * MIN)) % 23 === 0;
    record(
      "enrich",
      t,
      failed ? "failed" : "ok",
      40_000 + ((t / MIN) % 9) * 6000,
      failed ? "exit 2" : null,
      [failed ? 0 : 40, 2],
    );
  });
  // 02:00 in Berlin (winter time; in summer the picture's backup runs an hour off its slot).
  every(24 * HOUR, HOUR, (t) => record("backup", t, "ok", 14 * MIN, null, [1, 0]));
  for (const name of ["upload-attachments", "report", "enrich", "backup", "cleanup"]) {
    const ok = lastOk.get(name) ?? null;
    insJob.run(name, now, ok, ok, now - 30 * 24 * HOUR);
  }
})();
db.close();

// ---- the daemon, and the pictures ------------------------------------------------------------

const daemon = spawn(
  process.execPath,
  [path.join(ROOT, "bin", "cronvisor"), "daemon", "-c", path.join(dir, "jobs.yaml")],
  {
    stdio: ["ignore", "ignore", "inherit"],
  },
);
const get = () =>
  new Promise((resolve) =>
    http
      .get({ host: "127.0.0.1", port: PORT, path: "/status", agent: false }, (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve(res.statusCode === 200 ? JSON.parse(body) : null));
      })
      .on("error", () => resolve(null)),
  );
const deadline = Date.now() + 60_000;
for (;;) {
  const s = await get();
  if (s?.jobs.find((j) => j.name === "sync-crm")?.health === "stuck") break;
  if (Date.now() > deadline) throw new Error("the daemon did not come up with sync-crm stuck");
  await new Promise((r) => setTimeout(r, 250));
}
const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
try {
  for (const scheme of ["light", "dark"]) {
    const ctx = await browser.newContext({
      colorScheme: scheme,
      viewport: { width: 1280, height: 1000 },
    });
    const page = await ctx.newPage();
    await page.goto(`http://127.0.0.1:${PORT}/`);
    const out = path.join(ROOT, "docs", `page-${scheme}.png`);
    await page.screenshot({ path: out });
    console.log(`wrote ${path.relative(process.cwd(), out)}`);
    await ctx.close();
  }
} finally {
  await browser.close();
  daemon.kill("SIGTERM");
  await new Promise((r) => daemon.once("exit", r));
  fs.rmSync(dir, { recursive: true, force: true });
}

// The state store: the only module with SQL. One SQLite file per state dir, WAL, synchronous=FULL
// (a commit is on disk when the call returns), numbered migrations applied in one transaction with
// the version kept in PRAGMA user_version. Writes use BEGIN IMMEDIATE so two processes (the daemon,
// `cronvisor run`, `mark`) serialise on the write lock instead of failing half-way.
import Database from "better-sqlite3";
import fs from "node:fs";
import path from "node:path";
import type { RunFacts } from "../health/health.js";
import type { RunResult, RunStatus, Trigger } from "../core/types.js";

export const STORE_FILE = "cronvisor.db";

const MIGRATIONS: string[] = [
  // 1: the daemon singleton, per-job state, runs and slot dispositions, markers.
  `
  CREATE TABLE daemon (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pid INTEGER, pid_start TEXT, started_at INTEGER, heartbeat_at INTEGER, heartbeat_ms INTEGER,
    stopped_at INTEGER, config_file TEXT, config_error TEXT
  );
  CREATE TABLE jobs (
    name TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0,
    fence INTEGER NOT NULL DEFAULT 0,
    scanned_to INTEGER,
    reboot_boot_id TEXT,
    last_success_at INTEGER,
    last_progress_at INTEGER,
    first_seen_at INTEGER
  );
  CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL,
    slot INTEGER,
    trigger TEXT,
    status TEXT NOT NULL,
    reason TEXT,
    exit_code INTEGER,
    signal TEXT,
    attempt INTEGER NOT NULL DEFAULT 1,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    duration_ms INTEGER,
    fence INTEGER,
    revoked INTEGER NOT NULL DEFAULT 0,
    owner_pid INTEGER, owner_start TEXT,
    pid INTEGER, pid_start TEXT, pgid INTEGER,
    log_path TEXT, log_bytes INTEGER,
    progress_at INTEGER, progress_msg TEXT, progress_count INTEGER NOT NULL DEFAULT 0,
    markers_new INTEGER NOT NULL DEFAULT 0,
    markers_skipped INTEGER NOT NULL DEFAULT 0
  );
  CREATE INDEX runs_by_job ON runs(job, id);
  CREATE INDEX runs_running ON runs(job) WHERE status = 'running';
  CREATE TABLE slots (job TEXT NOT NULL, slot INTEGER NOT NULL, run_id INTEGER,
    PRIMARY KEY (job, slot)) WITHOUT ROWID;
  CREATE TABLE markers (job TEXT NOT NULL, key TEXT NOT NULL, run_id INTEGER, fence INTEGER,
    created_at INTEGER NOT NULL, PRIMARY KEY (job, key)) WITHOUT ROWID;
  CREATE TABLE claims (job TEXT NOT NULL, key TEXT NOT NULL, pid INTEGER NOT NULL,
    pid_start TEXT, run_id INTEGER, since INTEGER NOT NULL, PRIMARY KEY (job, key)) WITHOUT ROWID;
  CREATE TABLE attempts (job TEXT NOT NULL, key TEXT NOT NULL, count INTEGER NOT NULL,
    last_at INTEGER NOT NULL, PRIMARY KEY (job, key)) WITHOUT ROWID;
  CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, job TEXT,
    kind TEXT NOT NULL, detail TEXT);
  CREATE INDEX events_by_job ON events(job, id);
  `,
  // 2: what the alerts last announced per job (failing, stuck, repeating, late), so a daemon
  // restart neither repeats an alert nor forgets to send `recovered`.
  `
  CREATE TABLE alert_state (job TEXT PRIMARY KEY, active TEXT NOT NULL, since INTEGER NOT NULL) WITHOUT ROWID;
  `,
  // 3: the command a `once` claim runs, so the claim stays held while the command lives even if
  // the `once` process itself was killed.
  `
  ALTER TABLE claims ADD COLUMN cmd_pid INTEGER;
  ALTER TABLE claims ADD COLUMN cmd_start TEXT;
  `,
];

/** Who holds a `once` claim: the `once` process and, once started, its command. */
export interface ClaimRow {
  pid: number;
  pid_start: string | null;
  run_id: number | null;
  cmd_pid: number | null;
  cmd_start: string | null;
}

export class StoreError extends Error {
  constructor(
    message: string,
    readonly code: "missing" | "corrupt" | "busy" | "io",
  ) {
    super(message);
  }
}

export interface RunRow {
  id: number;
  job: string;
  slot: number | null;
  trigger: Trigger | null;
  status: RunStatus;
  reason: string | null;
  exit_code: number | null;
  signal: string | null;
  attempt: number;
  started_at: number;
  finished_at: number | null;
  duration_ms: number | null;
  fence: number | null;
  revoked: number;
  owner_pid: number | null;
  owner_start: string | null;
  pid: number | null;
  pid_start: string | null;
  pgid: number | null;
  log_path: string | null;
  log_bytes: number | null;
  progress_at: number | null;
  progress_msg: string | null;
  progress_count: number;
  markers_new: number;
  markers_skipped: number;
}

/** The columns of a run that a history entry (`history --json`, `status`'s `last_run`) shows. */
export type HistoryRow = Pick<
  RunRow,
  | "id"
  | "job"
  | "slot"
  | "trigger"
  | "status"
  | "reason"
  | "exit_code"
  | "signal"
  | "attempt"
  | "started_at"
  | "finished_at"
  | "duration_ms"
  | "markers_new"
  | "markers_skipped"
  | "pid"
  | "log_path"
>;
const HISTORY_COLUMNS = `id, job, slot, trigger, status, reason, exit_code, signal, attempt, started_at,
  finished_at, duration_ms, markers_new, markers_skipped, pid, log_path`;
/** The columns health reads (RunFacts in health.ts). */
const FACT_COLUMNS = "id, status, reason, started_at, finished_at, duration_ms, progress_at";
// (recentFinished maps its raw rows by position: keep the two in step.)

export interface JobRow {
  name: string;
  paused: number;
  fence: number;
  scanned_to: number | null;
  reboot_boot_id: string | null;
  last_success_at: number | null;
  last_progress_at: number | null;
  first_seen_at: number | null;
}

export interface DaemonRow {
  pid: number | null;
  pid_start: string | null;
  started_at: number | null;
  heartbeat_at: number | null;
  heartbeat_ms: number | null;
  stopped_at: number | null;
  config_file: string | null;
  config_error: string | null;
}

export interface MarkerRow {
  key: string;
  run_id: number | null;
  fence: number | null;
  created_at: number;
}

export interface EventRow {
  id: number;
  at: number;
  job: string | null;
  kind: string;
  detail: string | null;
}

/** Owner of a run: the process that supervises it (a daemon or `cronvisor run`). */
export interface Owner {
  pid: number;
  start: string | null;
}

export interface OpenOptions {
  /** Create the state dir and store if missing (the daemon and `run` do; readers don't). */
  create: boolean;
  /** Milliseconds a writer waits for another writer before SQLITE_BUSY. */
  busyTimeoutMs?: number;
  readonly?: boolean;
  /** Run PRAGMA quick_check at open (the daemon does; a CLI call inside a job must be fast). */
  check?: boolean;
}

export function storePath(stateDir: string): string {
  return path.join(stateDir, STORE_FILE);
}

export class Store {
  readonly db: Database.Database;
  private readonly stmts = new Map<string, Database.Statement>();

  private constructor(db: Database.Database) {
    this.db = db;
  }

  /**
   * Open the store. Never replaces a store that fails to open or check: a corrupt or unreadable
   * file is left untouched and reported, because an empty store would forget every marker.
   */
  static open(stateDir: string, opts: OpenOptions): Store {
    const file = storePath(stateDir);
    const exists = fs.existsSync(file);
    if (!exists && !opts.create) {
      throw new StoreError(
        `no state store at ${file} (has the daemon or a run ever started?)`,
        "missing",
      );
    }
    if (!exists) fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    let db: Database.Database;
    try {
      // The store and its WAL are created 0600: runs and markers may say more than they should.
      const oldMask = process.umask(0o077);
      try {
        db = new Database(file, { readonly: opts.readonly ?? false, fileMustExist: exists });
      } finally {
        process.umask(oldMask);
      }
      db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
      if (!opts.readonly) db.pragma("journal_mode = WAL");
      // better-sqlite3 keeps NORMAL on a database already in WAL mode: set FULL on every connection.
      db.pragma("synchronous = FULL");
      db.pragma("foreign_keys = OFF");
    } catch (e) {
      throw openFailure(file, e);
    }
    const store = new Store(db);
    try {
      if (opts.check) {
        const rows = db.pragma("quick_check") as { quick_check: string }[];
        const bad = rows.map((r) => r.quick_check).filter((m) => m !== "ok");
        if (bad.length > 0) {
          db.close();
          throw new StoreError(
            `state store ${file} failed its integrity check (${bad.slice(0, 3).join("; ")}); it was left untouched: restore it from a backup or move it away`,
            "corrupt",
          );
        }
      }
      if (!opts.readonly) store.migrate();
    } catch (e) {
      if (e instanceof StoreError) throw e;
      try {
        db.close();
      } catch {
        // already closed
      }
      throw openFailure(file, e);
    }
    return store;
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  private migrate(): void {
    const version = this.db.pragma("user_version", { simple: true }) as number;
    if (version > MIGRATIONS.length) {
      throw new StoreError(
        `state store schema version ${version} is newer than this cronvisor knows (${MIGRATIONS.length}); upgrade cronvisor`,
        "corrupt",
      );
    }
    if (version === MIGRATIONS.length) return;
    this.db
      .transaction(() => {
        // Re-read inside the write lock: another process may have migrated meanwhile.
        const v = this.db.pragma("user_version", { simple: true }) as number;
        for (let i = v; i < MIGRATIONS.length; i++) {
          this.db.exec(MIGRATIONS[i] as string);
        }
        this.db.pragma(`user_version = ${MIGRATIONS.length}`);
      })
      .immediate();
  }

  /** A prepared statement, cached: the same SQL is compiled once per connection. `raw`: rows as arrays. */
  private q(sql: string, raw = false): Database.Statement {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      if (raw) s.raw(true);
      this.stmts.set(sql, s);
    }
    return s;
  }

  /** Run fn in a BEGIN IMMEDIATE transaction. */
  tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  // ---- the daemon singleton ----------------------------------------------------------------

  daemon(): DaemonRow | null {
    return (this.q("SELECT * FROM daemon WHERE id = 1").get() as DaemonRow | undefined) ?? null;
  }

  /**
   * Claim the state dir for this daemon. `holderAlive` decides whether the recorded daemon still
   * lives; a live holder keeps it (even when stopped by SIGSTOP: it is alive, only not beating).
   */
  claimDaemon(
    me: Owner,
    now: number,
    heartbeatMs: number,
    configFile: string,
    holderAlive: (pid: number, start: string | null) => boolean,
  ): DaemonRow | null {
    return this.tx(() => {
      const cur = this.daemon();
      if (cur && cur.pid !== null && cur.stopped_at === null && cur.pid !== me.pid) {
        if (holderAlive(cur.pid, cur.pid_start)) return cur;
      }
      this.q(
        `INSERT INTO daemon (id, pid, pid_start, started_at, heartbeat_at, heartbeat_ms, stopped_at, config_file, config_error)
         VALUES (1, ?, ?, ?, ?, ?, NULL, ?, NULL)
         ON CONFLICT (id) DO UPDATE SET pid = excluded.pid, pid_start = excluded.pid_start,
           started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
           heartbeat_ms = excluded.heartbeat_ms, stopped_at = NULL,
           config_file = excluded.config_file, config_error = NULL`,
      ).run(me.pid, me.start, now, now, heartbeatMs, configFile);
      return null;
    });
  }

  heartbeat(pid: number, now: number, heartbeatMs: number): void {
    this.q("UPDATE daemon SET heartbeat_at = ?, heartbeat_ms = ? WHERE id = 1 AND pid = ?").run(
      now,
      heartbeatMs,
      pid,
    );
  }

  setConfigError(pid: number, message: string | null): void {
    this.q("UPDATE daemon SET config_error = ? WHERE id = 1 AND pid = ?").run(message, pid);
  }

  releaseDaemon(pid: number, now: number): void {
    this.q("UPDATE daemon SET stopped_at = ? WHERE id = 1 AND pid = ?").run(now, pid);
  }

  // ---- jobs ----------------------------------------------------------------------------------

  job(name: string): JobRow | null {
    return (this.q("SELECT * FROM jobs WHERE name = ?").get(name) as JobRow | undefined) ?? null;
  }

  allJobs(): JobRow[] {
    return this.q("SELECT * FROM jobs ORDER BY name").all() as JobRow[];
  }

  ensureJob(name: string, now: number): JobRow {
    this.q(
      "INSERT INTO jobs (name, first_seen_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
    ).run(name, now);
    return this.job(name) as JobRow;
  }

  setPaused(name: string, paused: boolean, now: number): void {
    this.tx(() => {
      this.ensureJob(name, now);
      this.q("UPDATE jobs SET paused = ? WHERE name = ?").run(paused ? 1 : 0, name);
      this.event(now, name, paused ? "paused" : "resumed", null);
    });
  }

  /** Jobs paused with `cronvisor pause` (the config's `paused: true` is not in the store). */
  pausedJobs(): Set<string> {
    const rows = this.q("SELECT name FROM jobs WHERE paused = 1").all() as { name: string }[];
    return new Set(rows.map((r) => r.name));
  }

  /** Slots up to `at` have a disposition. Never moves backwards (a clock stepped back). */
  setScannedTo(name: string, at: number): void {
    this.q("UPDATE jobs SET scanned_to = MAX(COALESCE(scanned_to, 0), ?) WHERE name = ?").run(
      at,
      name,
    );
  }

  /** Record that @reboot ran for this boot; false if it already did. */
  claimReboot(name: string, bootId: string, now: number): boolean {
    return this.tx(() => {
      const row = this.ensureJob(name, now);
      if (row.reboot_boot_id === bootId) return false;
      this.q("UPDATE jobs SET reboot_boot_id = ? WHERE name = ?").run(bootId, name);
      return true;
    });
  }

  // ---- runs, slots and the per-job lock ---------------------------------------------------

  /**
   * Start a run: in one transaction, claim the slot (if any), check the job's lock, bump the
   * fence and insert the `running` row. The lock is "a running run of this job whose owner or
   * process group still lives"; a holder found dead is recorded `interrupted` and taken over at
   * once. Returns the new run, or the run holding the lock, or `duplicate` if the slot already
   * has a disposition (the same slot never starts twice).
   */
  startRun(a: {
    job: string;
    slot: number | null;
    claimSlot: boolean;
    trigger: Trigger;
    attempt: number;
    /**
     * The clock, read once the write lock is held: a time read before BEGIN IMMEDIATE waited
     * out another writer could be older than the end that writer recorded, and the history
     * would show this run starting before the one it waited for had ended.
     */
    now: number | (() => number);
    owner: Owner;
    /** Take the job's lock (false only for `overlap: allow`). */
    lock: boolean;
    holderAlive: (run: RunRow) => boolean;
    logPath: (runId: number) => string;
  }):
    | { kind: "started"; run: RunRow }
    | { kind: "locked"; holder: RunRow }
    | { kind: "duplicate"; slotRunId: number | null } {
    return this.tx(() => {
      const now = typeof a.now === "function" ? a.now() : a.now;
      this.ensureJob(a.job, now);
      if (a.claimSlot && a.slot !== null) {
        const have = this.q("SELECT run_id FROM slots WHERE job = ? AND slot = ?").get(
          a.job,
          a.slot,
        ) as { run_id: number | null } | undefined;
        if (have) return { kind: "duplicate" as const, slotRunId: have.run_id };
      }
      if (a.lock) {
        const holder = this.reapDeadHolders(a.job, now, a.holderAlive);
        if (holder) {
          if (a.claimSlot && a.slot !== null) {
            this.disposition(
              a.job,
              a.slot,
              "skipped",
              `overlap: run ${holder.id} holds the lock`,
              now,
            );
          }
          return { kind: "locked" as const, holder };
        }
      }
      this.q("UPDATE jobs SET fence = fence + 1 WHERE name = ?").run(a.job);
      const fence = (this.job(a.job) as JobRow).fence;
      const info = this.q(
        `INSERT INTO runs (job, slot, trigger, status, attempt, started_at, fence, owner_pid, owner_start, progress_at)
         VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?)`,
      ).run(a.job, a.slot, a.trigger, a.attempt, now, fence, a.owner.pid, a.owner.start, now);
      const id = Number(info.lastInsertRowid);
      this.q("UPDATE runs SET log_path = ? WHERE id = ?").run(a.logPath(id), id);
      if (a.claimSlot && a.slot !== null) {
        this.q("INSERT INTO slots (job, slot, run_id) VALUES (?, ?, ?)").run(a.job, a.slot, id);
        this.setScannedTo(a.job, a.slot);
      }
      return { kind: "started" as const, run: this.run(id) as RunRow };
    });
  }

  /** The live lock holder of a job, after recording dead holders `interrupted`. */
  private reapDeadHolders(job: string, now: number, alive: (r: RunRow) => boolean): RunRow | null {
    let holder: RunRow | null = null;
    for (const r of this.runningRuns(job)) {
      if (alive(r)) {
        holder ??= r;
      } else {
        this.finishRow(r.id, {
          status: "interrupted",
          reason: "its processes and supervisor died",
          exitCode: null,
          signal: null,
          finishedAt: now,
          durationMs: now - r.started_at,
          logBytes: r.log_bytes ?? 0,
        });
      }
    }
    return holder;
  }

  /** Record that the run's process started (pid + start time: pids are reused). */
  setRunProcess(runId: number, pid: number, pidStart: string | null, pgid: number): void {
    this.q("UPDATE runs SET pid = ?, pid_start = ?, pgid = ? WHERE id = ?").run(
      pid,
      pidStart,
      pgid,
      runId,
    );
  }

  /** A restarted daemon (or another owner) takes over supervising a live orphan. */
  adoptRun(runId: number, owner: Owner): void {
    this.q("UPDATE runs SET owner_pid = ?, owner_start = ? WHERE id = ?").run(
      owner.pid,
      owner.start,
      runId,
    );
  }

  /** Revoke the run's fence: its marker writes are refused from now on. */
  revokeRun(runId: number): void {
    this.q("UPDATE runs SET revoked = 1 WHERE id = ?").run(runId);
  }

  finishRun(runId: number, r: RunResult): void {
    this.tx(() =>
      this.finishRow(runId, {
        status: r.status,
        reason: r.reason,
        exitCode: r.exitCode,
        signal: r.signal,
        finishedAt: r.finishedAt,
        durationMs: r.durationMs,
        logBytes: r.logBytes,
      }),
    );
  }

  private finishRow(
    runId: number,
    r: {
      status: RunStatus;
      reason: string | null;
      exitCode: number | null;
      signal: string | null;
      finishedAt: number;
      durationMs: number;
      logBytes: number;
    },
  ): void {
    // Only a running row is finished: a run recorded twice (adopter and owner racing) keeps the first.
    const info = this.q(
      `UPDATE runs SET status = ?, reason = ?, exit_code = ?, signal = ?, finished_at = ?,
         duration_ms = ?, log_bytes = ?, revoked = 1
       WHERE id = ? AND status = 'running'`,
    ).run(r.status, r.reason, r.exitCode, r.signal, r.finishedAt, r.durationMs, r.logBytes, runId);
    if (info.changes > 0 && r.status === "ok") {
      this.q(
        `UPDATE jobs SET last_success_at = MAX(COALESCE(last_success_at, 0), ?),
           last_progress_at = MAX(COALESCE(last_progress_at, 0), ?)
         WHERE name = (SELECT job FROM runs WHERE id = ?)`,
      ).run(r.finishedAt, r.finishedAt, runId);
    }
  }

  /** A slot that did not run: `skipped` (overlap, paused) or `missed` (daemon down). */
  disposition(
    job: string,
    slot: number,
    status: "skipped" | "missed",
    reason: string,
    now: number,
  ): boolean {
    const claimed = this.q(
      "INSERT INTO slots (job, slot, run_id) VALUES (?, ?, NULL) ON CONFLICT DO NOTHING",
    ).run(job, slot);
    if (claimed.changes === 0) return false;
    this.q(
      `INSERT INTO runs (job, slot, trigger, status, reason, attempt, started_at, finished_at, duration_ms)
       VALUES (?, ?, 'schedule', ?, ?, 1, ?, ?, 0)`,
    ).run(job, slot, status, reason, now, now);
    this.setScannedTo(job, slot);
    return true;
  }

  recordDisposition(
    job: string,
    slot: number,
    status: "skipped" | "missed",
    reason: string,
    now: number,
  ): boolean {
    return this.tx(() => {
      this.ensureJob(job, now);
      return this.disposition(job, slot, status, reason, now);
    });
  }

  run(id: number): RunRow | null {
    return (this.q("SELECT * FROM runs WHERE id = ?").get(id) as RunRow | undefined) ?? null;
  }

  runningRuns(job?: string): RunRow[] {
    return job === undefined
      ? // INDEXED BY: for ORDER BY id the planner prefers a scan of every run (30 ms at 100,000).
        (this.q(
          "SELECT * FROM runs INDEXED BY runs_running WHERE status = 'running' ORDER BY id",
        ).all() as RunRow[])
      : (this.q("SELECT * FROM runs WHERE status = 'running' AND job = ? ORDER BY id").all(
          job,
        ) as RunRow[]);
  }

  /** Newest first. */
  history(job: string | null, limit: number): RunRow[] {
    return job === null
      ? (this.q("SELECT * FROM runs ORDER BY id DESC LIMIT ?").all(limit) as RunRow[])
      : (this.q("SELECT * FROM runs WHERE job = ? ORDER BY id DESC LIMIT ?").all(
          job,
          limit,
        ) as RunRow[]);
  }

  /** The latest run that had a process (not a skipped/missed disposition), as a history entry. */
  lastRun(job: string): HistoryRow | null {
    return (
      (this.q(
        `SELECT ${HISTORY_COLUMNS} FROM runs WHERE job = ? AND status NOT IN ('skipped', 'missed')
         ORDER BY id DESC LIMIT 1`,
      ).get(job) as HistoryRow | undefined) ?? null
    );
  }

  /** One run's history-entry columns (null if there is no such run). */
  historyRow(id: number): HistoryRow | null {
    return (
      (this.q(`SELECT ${HISTORY_COLUMNS} FROM runs WHERE id = ?`).get(id) as
        HistoryRow | undefined) ?? null
    );
  }

  /**
   * Finished runs with a process, newest first: what health is derived from. Only the columns
   * health reads: `status` reads these for every job, and whole rows cost ~4x as much.
   */
  recentFinished(job: string, limit: number): RunFacts[] {
    // Raw rows, made into objects here: better-sqlite3 builds each row object key by key, which
    // was a third of the time of this query over 1,000 jobs.
    const rows = this.q(
      `SELECT ${FACT_COLUMNS} FROM runs WHERE job = ? AND status NOT IN ('running', 'skipped', 'missed')
       ORDER BY id DESC LIMIT ?`,
      true,
    ).all(job, limit) as unknown[][];
    return rows.map((r) => ({
      id: r[0] as number,
      status: r[1] as RunStatus,
      reason: r[2] as string | null,
      started_at: r[3] as number,
      finished_at: r[4] as number | null,
      duration_ms: r[5] as number | null,
      progress_at: r[6] as number | null,
    }));
  }

  /** Delete finished runs beyond the newest `keep` of a job; returns their log paths. */
  pruneRuns(job: string, keep: number): string[] {
    return this.tx(() => {
      const old = this.q(
        `SELECT id, log_path FROM runs WHERE job = ? AND status != 'running'
         AND id < (SELECT MIN(id) FROM (SELECT id FROM runs WHERE job = ? ORDER BY id DESC LIMIT ?))`,
      ).all(job, job, keep) as { id: number; log_path: string | null }[];
      if (old.length === 0) return [];
      const maxId = Math.max(...old.map((r) => r.id));
      this.q("DELETE FROM runs WHERE job = ? AND status != 'running' AND id <= ?").run(job, maxId);
      return old.map((r) => r.log_path).filter((p): p is string => p !== null);
    });
  }

  // ---- markers, claims, progress ----------------------------------------------------------

  /**
   * May this run write markers? Only while it is the job's current, live, unrevoked run:
   * a straggler, a replaced run or a run whose lock was taken over is refused.
   */
  fenceValid(job: string, runId: number, fence: number): boolean {
    const r = this.q(
      "SELECT 1 FROM runs WHERE id = ? AND job = ? AND fence = ? AND status = 'running' AND revoked = 0",
    ).get(runId, job, fence);
    return r !== undefined;
  }

  isMarked(job: string, key: string): boolean {
    return this.q("SELECT 1 FROM markers WHERE job = ? AND key = ?").get(job, key) !== undefined;
  }

  /** Insert a marker; returns true if it is new. Counts it on the run and as job progress. */
  insertMarker(
    job: string,
    key: string,
    runId: number | null,
    fence: number | null,
    now: number,
  ): boolean {
    const info = this.q(
      "INSERT INTO markers (job, key, run_id, fence, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    ).run(job, key, runId, fence, now);
    if (info.changes === 0) return false;
    this.q("DELETE FROM attempts WHERE job = ? AND key = ?").run(job, key);
    if (runId !== null) {
      this.q("UPDATE runs SET markers_new = markers_new + 1, progress_at = ? WHERE id = ?").run(
        now,
        runId,
      );
    }
    this.q(
      "UPDATE jobs SET last_progress_at = MAX(COALESCE(last_progress_at, 0), ?) WHERE name = ?",
    ).run(now, job);
    return true;
  }

  countSkipped(runId: number | null, n = 1): void {
    if (runId !== null)
      this.q("UPDATE runs SET markers_skipped = markers_skipped + ? WHERE id = ?").run(n, runId);
  }

  removeMarker(job: string, key: string, now: number, by: string): boolean {
    return this.tx(() => {
      const info = this.q("DELETE FROM markers WHERE job = ? AND key = ?").run(job, key);
      if (info.changes > 0) this.event(now, job, "unmark", `${key} (by ${by})`);
      return info.changes > 0;
    });
  }

  markers(job: string): MarkerRow[] {
    return this.q(
      "SELECT key, run_id, fence, created_at FROM markers WHERE job = ? ORDER BY created_at, key",
    ).all(job) as MarkerRow[];
  }

  markerCount(job: string): number {
    return (this.q("SELECT COUNT(*) AS n FROM markers WHERE job = ?").get(job) as { n: number }).n;
  }

  /** Every job's marker count in one pass (jobs without markers are absent). */
  markerCounts(): Map<string, number> {
    const rows = this.q("SELECT job, COUNT(*) AS n FROM markers GROUP BY job", true).all() as [
      string,
      number,
    ][];
    return new Map(rows);
  }

  claim(job: string, key: string): ClaimRow | undefined {
    return this.q(
      "SELECT pid, pid_start, run_id, cmd_pid, cmd_start FROM claims WHERE job = ? AND key = ?",
    ).get(job, key) as ClaimRow | undefined;
  }

  /**
   * Note the command a claim runs. Not fsync'd (synchronous=NORMAL for this one commit): it
   * only matters while processes live, and a power loss ends them all.
   */
  setClaimCommand(
    job: string,
    key: string,
    pid: number,
    cmdPid: number,
    cmdStart: string | null,
  ): void {
    this.db.pragma("synchronous = NORMAL");
    try {
      this.tx(() =>
        this.q(
          "UPDATE claims SET cmd_pid = ?, cmd_start = ? WHERE job = ? AND key = ? AND pid = ?",
        ).run(cmdPid, cmdStart, job, key, pid),
      );
    } finally {
      this.db.pragma("synchronous = FULL");
    }
  }

  putClaim(
    job: string,
    key: string,
    pid: number,
    pidStart: string | null,
    runId: number | null,
    now: number,
  ): void {
    this.q(
      `INSERT INTO claims (job, key, pid, pid_start, run_id, since) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (job, key) DO UPDATE SET pid = excluded.pid, pid_start = excluded.pid_start,
         run_id = excluded.run_id, since = excluded.since, cmd_pid = NULL, cmd_start = NULL`,
    ).run(job, key, pid, pidStart, runId, now);
  }

  dropClaim(job: string, key: string, pid: number): void {
    this.q("DELETE FROM claims WHERE job = ? AND key = ? AND pid = ?").run(job, key, pid);
  }

  countAttempt(job: string, key: string, now: number): number {
    this.q(
      `INSERT INTO attempts (job, key, count, last_at) VALUES (?, ?, 1, ?)
       ON CONFLICT (job, key) DO UPDATE SET count = count + 1, last_at = excluded.last_at`,
    ).run(job, key, now);
    return (
      this.q("SELECT count FROM attempts WHERE job = ? AND key = ?").get(job, key) as {
        count: number;
      }
    ).count;
  }

  /** Keys attempted more than `limit` times without being marked, worst first. */
  repeatingKeys(job: string, limit: number): { key: string; count: number }[] {
    return this.q(
      "SELECT key, count FROM attempts WHERE job = ? AND count > ? ORDER BY count DESC, key LIMIT 10",
    ).all(job, limit) as { key: string; count: number }[];
  }

  progress(runId: number, message: string | null, now: number): void {
    this.tx(() => {
      this.q(
        "UPDATE runs SET progress_at = ?, progress_msg = COALESCE(?, progress_msg), progress_count = progress_count + 1 WHERE id = ?",
      ).run(now, message, runId);
      this.q(
        "UPDATE jobs SET last_progress_at = MAX(COALESCE(last_progress_at, 0), ?) WHERE name = (SELECT job FROM runs WHERE id = ?)",
      ).run(now, runId);
    });
  }

  // ---- events ------------------------------------------------------------------------------

  event(at: number, job: string | null, kind: string, detail: string | null): void {
    this.q("INSERT INTO events (at, job, kind, detail) VALUES (?, ?, ?, ?)").run(
      at,
      job,
      kind,
      detail,
    );
  }

  events(job: string | null, limit: number): EventRow[] {
    return job === null
      ? (this.q("SELECT * FROM events ORDER BY id DESC LIMIT ?").all(limit) as EventRow[])
      : (this.q("SELECT * FROM events WHERE job = ? ORDER BY id DESC LIMIT ?").all(
          job,
          limit,
        ) as EventRow[]);
  }

  // ---- monitoring (alerts, metrics): read-mostly queries ---------------------------------------

  /**
   * Keys attempted more than `limit` times without being marked, whose last attempt is at or
   * after `since` (still being tried), worst first.
   */
  repeatingKeysSince(
    job: string,
    limit: number,
    since: number,
  ): { key: string; count: number; last_at: number }[] {
    return this.q(
      `SELECT key, count, last_at FROM attempts WHERE job = ? AND count > ? AND last_at >= ?
       ORDER BY count DESC, key LIMIT 10`,
    ).all(job, limit, since) as { key: string; count: number; last_at: number }[];
  }

  /**
   * repeatingKeysSince for every job at once: the keys attempted more than `limit` times without
   * being marked, by job, worst first (the caller applies each job's own limit and `since`).
   */
  repeatingKeysAll(limit: number): Map<string, { key: string; count: number; last_at: number }[]> {
    const rows = this.q(
      "SELECT job, key, count, last_at FROM attempts WHERE count > ? ORDER BY job, count DESC, key",
    ).all(limit) as { job: string; key: string; count: number; last_at: number }[];
    const by = new Map<string, { key: string; count: number; last_at: number }[]>();
    for (const { job, key, count, last_at } of rows) {
      let list = by.get(job);
      if (!list) by.set(job, (list = []));
      list.push({ key, count, last_at });
    }
    return by;
  }

  /** Run fn with every read in it seeing one snapshot of the store (a deferred transaction). */
  snapshot<T>(fn: () => T): T {
    return this.db.inTransaction ? fn() : this.db.transaction(fn).deferred();
  }

  /** A job's rows (runs and dispositions, any status) with an id above `afterId`, oldest first. */
  runsAfter(job: string, afterId: number, limit: number): RunRow[] {
    return this.q("SELECT * FROM runs WHERE job = ? AND id > ? ORDER BY id LIMIT ?").all(
      job,
      afterId,
      limit,
    ) as RunRow[];
  }

  /** A job's rows still running or finished at or after `since`, oldest first. */
  runsRunningOrFinishedSince(job: string, since: number): RunRow[] {
    return this.q(
      "SELECT * FROM runs WHERE job = ? AND (status = 'running' OR finished_at >= ?) ORDER BY id",
    ).all(job, since) as RunRow[];
  }

  /** The highest row id of a job (0 if none). */
  /**
   * Jobs with rows newer than the given run and event ids, and the newest ids: how the daemon's
   * monitor learns what changed since its last beat without reading every job.
   */
  jobsChangedSince(
    runId: number,
    eventId: number,
  ): { jobs: Set<string>; runId: number; eventId: number } {
    const runs = this.q("SELECT job, MAX(id) AS m FROM runs WHERE id > ? GROUP BY job").all(
      runId,
    ) as { job: string; m: number }[];
    const events = this.q("SELECT job, MAX(id) AS m FROM events WHERE id > ? GROUP BY job").all(
      eventId,
    ) as { job: string | null; m: number }[];
    const jobs = new Set<string>();
    for (const r of runs) {
      jobs.add(r.job);
      runId = Math.max(runId, r.m);
    }
    for (const e of events) {
      if (e.job !== null) jobs.add(e.job);
      eventId = Math.max(eventId, e.m);
    }
    return { jobs, runId, eventId };
  }

  /** The newest run and event ids (0 when there are none). */
  maxIds(): { runId: number; eventId: number } {
    return this.q(
      `SELECT (SELECT COALESCE(MAX(id), 0) FROM runs) AS runId,
              (SELECT COALESCE(MAX(id), 0) FROM events) AS eventId`,
    ).get() as { runId: number; eventId: number };
  }

  /** Jobs whose marker keys were attempted at or after `since` (`once` may run outside a run). */
  jobsAttemptedSince(since: number): string[] {
    const rows = this.q("SELECT DISTINCT job FROM attempts WHERE last_at >= ?").all(since) as {
      job: string;
    }[];
    return rows.map((r) => r.job);
  }

  /** Changes when another connection commits (SQLite's PRAGMA data_version). */
  dataVersion(): number {
    return this.db.pragma("data_version", { simple: true }) as number;
  }

  maxRunId(job: string): number {
    return (
      this.q("SELECT COALESCE(MAX(id), 0) AS n FROM runs WHERE job = ?").get(job) as { n: number }
    ).n;
  }

  /** The conditions last announced for a job, comma-separated, and since when; null if never. */
  alertState(job: string): { active: string; since: number } | null {
    return (
      (this.q("SELECT active, since FROM alert_state WHERE job = ?").get(job) as
        { active: string; since: number } | undefined) ?? null
    );
  }

  setAlertState(job: string, active: string, now: number): void {
    this.q(
      `INSERT INTO alert_state (job, active, since) VALUES (?, ?, ?)
       ON CONFLICT (job) DO UPDATE SET active = excluded.active, since = excluded.since`,
    ).run(job, active, now);
  }

  /** Per-job gauges for a metrics scrape, in one pass: running runs and markers, by job. */
  jobGauges(): {
    name: string;
    paused: number;
    last_success_at: number | null;
    last_progress_at: number | null;
    running: number;
    markers: number;
  }[] {
    return this.q(
      `SELECT j.name, j.paused, j.last_success_at, j.last_progress_at,
         (SELECT COUNT(*) FROM runs r WHERE r.job = j.name AND r.status = 'running') AS running,
         (SELECT COUNT(*) FROM markers m WHERE m.job = j.name) AS markers
       FROM jobs j ORDER BY j.name`,
    ).all() as {
      name: string;
      paused: number;
      last_success_at: number | null;
      last_progress_at: number | null;
      running: number;
      markers: number;
    }[];
  }
}

function openFailure(file: string, e: unknown): StoreError {
  const err = e as { code?: string; message?: string };
  const msg = err.message ?? String(e);
  if (err.code === "SQLITE_NOTADB" || err.code === "SQLITE_CORRUPT") {
    return new StoreError(
      `state store ${file} is not a valid database (${msg}); it was left untouched: restore it from a backup or move it away`,
      "corrupt",
    );
  }
  if (err.code === "SQLITE_BUSY")
    return new StoreError(`state store ${file} is busy: ${msg}`, "busy");
  return new StoreError(`cannot open state store ${file}: ${msg}`, "io");
}

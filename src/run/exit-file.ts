// The files the spawner writes for each run under the state dir's runs/: the exit status, so a
// daemon restarted while the job runs (which cannot wait() for a process it did not start) still
// learns how it ended, and the pid with its start time, written before the exec, so a daemon
// killed before it recorded the pid still finds the run (the spawner renames it away, to serve
// a later run's pid file, once the run is over). This module owns their paths, reading
// them back and removing them once the end is recorded.
import fs from "node:fs";
import path from "node:path";
import { READ_NOFOLLOW } from "../core/safe-path.js";
import { ensureDir } from "./log.js";
import { retire } from "./spare.js";

export function exitFileFor(stateDir: string, runId: number): string {
  return path.join(stateDir, "runs", `${runId}.exit`);
}

export function pidFileFor(stateDir: string, runId: number): string {
  return path.join(stateDir, "runs", `${runId}.pid`);
}

/** The pid and start time the spawner wrote before the run's exec, or null (never followed). */
export function readPidFile(file: string): { pid: number; start: string | null } | null {
  let fd: number | null = null;
  try {
    fd = fs.openSync(file, READ_NOFOLLOW);
    if (!fs.fstatSync(fd).isFile()) return null;
    const buf = Buffer.alloc(64);
    const [pid, start] = buf.toString("utf8", 0, fs.readSync(fd, buf)).trim().split(" ");
    const n = Number(pid);
    return Number.isInteger(n) && n > 1 ? { pid: n, start: start || null } : null;
  } catch {
    return null;
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

/** No stale status may be read for a new run: whatever lies at its exit file's path goes. */
export function freshExitFile(exitFile: string): void {
  ensureDir(path.dirname(exitFile));
  // A stale status must never be read for this run. Run ids are fresh, so there rarely is
  // one: look first (existsSync does not throw; a failed unlink's exception cost 4% of the
  // daemon's CPU at 50 runs a second).
  if (fs.existsSync(exitFile)) fs.unlinkSync(exitFile);
}

/**
 * The exit status the wrapper recorded, or null when it has not (yet) written one, or when what
 * lies there is not a small regular file (a link or a FIFO planted in its place is never
 * followed or waited on: a daemon adopting runs must not freeze).
 */
export function readExitFile(file: string): number | null {
  let fd: number | null = null;
  try {
    fd = fs.openSync(file, READ_NOFOLLOW);
    if (!fs.fstatSync(fd).isFile()) return null;
    const buf = Buffer.alloc(16);
    const n = Number.parseInt(buf.toString("utf8", 0, fs.readSync(fd, buf)).trim(), 10);
    return Number.isFinite(n) ? n : null;
  } catch {
    return null;
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

/**
 * The daemon's way to be done with an exit file once the end is recorded: its inode becomes a
 * spare for a later run's log (spare.ts). `cronvisor run`, which exits next, removes it instead.
 */
export function retireExitFile(stateDir: string, runId: number): void {
  retire(exitFileFor(stateDir, runId), stateDir);
  removeLeftPidFile(stateDir, runId);
}

/** Once the end is recorded, the run's exit and pid files have served their purpose. */
export function removeExitFile(stateDir: string, runId: number): void {
  removeIfThere(exitFileFor(stateDir, runId));
  removeLeftPidFile(stateDir, runId);
}

/**
 * The spawner puts a run's pid file away as its own spare at the run's end (spawner.c,
 * pid_spare_put): one is left only by a spawner that died under its run.
 */
function removeLeftPidFile(stateDir: string, runId: number): void {
  removeIfThere(pidFileFor(stateDir, runId));
}

/** Best effort; looked for first, as a failed unlink's exception costs more than the look. */
function removeIfThere(file: string): void {
  if (!fs.existsSync(file)) return;
  try {
    fs.unlinkSync(file);
  } catch {
    // a stale exit or pid file is never read for a finished run
  }
}

// Process identity and liveness, read from /proc. A pid alone is never an identity (pids are
// reused): every holder is recorded as pid + the kernel's start time of that pid.
import fs from "node:fs";

/** The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or null if gone. */
export function startTimeOf(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may contain spaces and parentheses: split after the last ")".
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (rest[0] === "Z" || rest[0] === "X") return null; // a zombie has finished its work
    return rest[19] ?? null;
  } catch {
    return null;
  }
}

/** Is this exact process (pid + start time) still alive? */
export function isAlive(pid: number, startTime: string | null): boolean {
  const now = startTimeOf(pid);
  return now !== null && (startTime === null || now === startTime);
}

/** Does any process of this process group still exist (including stopped ones)? */
export function groupAlive(pgid: number): boolean {
  if (pgid <= 1) return false;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Signal a whole process group; false if it no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  if (pgid <= 1) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

let cachedBootId: string | null = null;
/** The kernel's boot id: `@reboot` fires once per boot, not once per daemon start. */
export function bootId(): string {
  if (cachedBootId === null) {
    try {
      cachedBootId = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    } catch {
      cachedBootId = "unknown";
    }
  }
  return cachedBootId;
}

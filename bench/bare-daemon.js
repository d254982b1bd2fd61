// The floor a scheduler daemon is built on: one Node process, croner with one Cron per job, and
// child_process.spawn(argv) per tick, with nothing else (no lock, no store, no log file). Every job
// fires every second. The child gets CRONVISOR_JOB and CRONVISOR_SLOT like a cronvisor run, so
// the same stamp program can record its start.
//
//   node bench/bare-daemon.js --jobs 50 -- /bin/true
//   node bench/bare-daemon.js --jobs 50 --exit-dir DIR -- /bin/true
//
// With --exit-dir, each child runs inside an exit-status wrapper (a /bin/sh that writes the status
// to a file under DIR, as cronvisor did before its spawner), and the file is removed once the
// child has exited: the floor a fork-per-run daemon pays that must learn how a run ended across
// its own restart. With --child-nice-offset N (as root), each child starts N
// above the daemon's nice, the forking thread switched just for the spawn, as the daemon does.
//
// Prints "ready" when its jobs are scheduled, {"started":N,"exited":M} on SIGUSR2 (the counts so
// far), and the same on SIGTERM, then exits.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Cron } from "croner";

const args = process.argv.slice(2);
const sep = args.indexOf("--");
const jobs = Number(args[args.indexOf("--jobs") + 1] ?? 50);
const argv = args.slice(sep + 1);
const opt = (name) =>
  args.indexOf(name) >= 0 && args.indexOf(name) < sep ? args[args.indexOf(name) + 1] : null;
const exitDir = opt("--exit-dir");
/** `sh -c WRAPPER cronvisor-run EXITFILE ARGV...`: runs ARGV, writes its exit status to EXITFILE. */
const EXIT_WRAPPER =
  'f=$1; shift; trap : HUP INT QUIT TERM; exec 3>&2 2>/dev/null; (exec "$@" 2>&3 3>&-); rc=$?; set -C; echo "$rc" > "$f"; exit "$rc"';
const withExitFile = (argv, file) => [
  "/bin/sh",
  "-c",
  EXIT_WRAPPER,
  "cronvisor-run",
  file,
  ...argv,
];
const niceOffset = Number(opt("--child-nice-offset") ?? 0);

/** spawn() with the forking thread (nice is per thread on Linux) at the children's nice. */
function spawnNiced(cmd, argv, options) {
  if (niceOffset === 0) return spawn(cmd, argv, options);
  const own = os.getPriority(0);
  os.setPriority(0, own + niceOffset);
  try {
    return spawn(cmd, argv, options);
  } finally {
    os.setPriority(0, own);
  }
}
if (sep < 0 || argv.length === 0 || !(jobs > 0)) {
  process.stderr.write("usage: node bench/bare-daemon.js --jobs N -- CMD [ARG...]\n");
  process.exit(2);
}

let started = 0;
let exited = 0;
const crons = [];
for (let i = 0; i < jobs; i++) {
  const name = `j${String(i).padStart(5, "0")}`;
  crons.push(
    new Cron("* * * * * *", () => {
      // croner fires at or after the slot, never before: for a per-second job the slot is the
      // whole second (as long as the tick is less than a second late).
      const slot = Math.floor(Date.now() / 1000) * 1000;
      const exitFile = exitDir ? path.join(exitDir, `${started}.exit`) : null;
      const run = exitFile ? withExitFile(argv, exitFile) : argv;
      const child = spawnNiced(run[0], run.slice(1), {
        env: { CRONVISOR_JOB: name, CRONVISOR_SLOT: new Date(slot).toISOString() },
      });
      started++;
      child.on("exit", () => {
        exited++;
        if (exitFile) fs.rmSync(exitFile, { force: true });
      });
    }),
  );
}
process.stdout.write("ready\n");
const counts = () => `${JSON.stringify({ started, exited })}\n`;
process.on("SIGUSR2", () => process.stdout.write(counts()));
process.on("SIGTERM", () => {
  for (const c of crons) c.stop();
  process.stdout.write(counts(), () => process.exit(0));
});

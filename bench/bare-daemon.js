// The floor a scheduler daemon is built on: one Node process, croner with one Cron per job, and
// child_process.spawn(argv) per tick, with nothing else (no lock, no store, no log file). Every job
// fires every second. The child gets CRONVISOR_JOB and CRONVISOR_SLOT like a cronvisor run, so
// the same stamp program can record its start.
//
//   node bench/bare-daemon.js --jobs 50 -- /bin/true
//
// Prints "ready" when its jobs are scheduled, {"started":N,"exited":M} on SIGUSR2 (the counts so
// far), and the same on SIGTERM, then exits.
import { spawn } from "node:child_process";
import { Cron } from "croner";

const args = process.argv.slice(2);
const sep = args.indexOf("--");
const jobs = Number(args[args.indexOf("--jobs") + 1] ?? 50);
const argv = args.slice(sep + 1);
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
      const child = spawn(argv[0], argv.slice(1), {
        env: { CRONVISOR_JOB: name, CRONVISOR_SLOT: new Date(slot).toISOString() },
      });
      started++;
      child.on("exit", () => exited++);
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

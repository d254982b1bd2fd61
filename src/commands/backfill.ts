// `cronvisor backfill JOB --from T --to T [--dry-run] [--max N] [--keep-going]`: run each slot of
// a range that has no `ok` run, oldest first, one at a time, through the path `cronvisor run`
// takes (run.ts `supervised`, run/execute.ts `launch`): the job's lock, CRONVISOR_SLOT = the
// slot, trigger `backfill`, recorded in history. Whether or not the daemon runs. Which slots run
// is decided in daemon/backfill.ts (pure); a slot no daemon has recorded yet is claimed, so a
// daemon's catch-up does not run it again, without moving the job's slot stamp.
import type { JobConfig } from "../core/types.js";
import { EXIT, runExitCode } from "../core/exit.js";
import type { RunContext } from "../run/execute.js";
import { checkSafe, CliError, findJob, load, openStoreOrEmpty, out } from "./shared.js";

export interface BackfillOptions {
  config?: string;
  from?: string;
  to?: string;
  dryRun?: boolean;
  max?: string;
  keepGoing?: boolean;
}

const iso = (t: number): string => new Date(t).toISOString();

export async function backfill(name: string, o: BackfillOptions): Promise<void> {
  const config = await load(o.config);
  const job = findJob(config, name);
  const max = o.max === undefined ? 100 : Number(o.max);
  if (!Number.isInteger(max) || max < 1)
    throw new CliError(
      `--max ${JSON.stringify(o.max)}: not a whole number of at least 1`,
      EXIT.usage,
    );
  if (job.pattern === null)
    throw new CliError(
      `cronvisor: ${job.name} runs @reboot: it has no slots to backfill (run it with: cronvisor run ${job.name})`,
      EXIT.usage,
    );
  const { parseIsoTime } = await import("../schedule/zone.js");
  const { edgeInstant, planBackfill } = await import("../daemon/backfill.js");
  const edge = (flag: "from" | "to", text: string | undefined): number => {
    const at = text === undefined ? null : parseIsoTime(text);
    if (at === null)
      throw new CliError(
        `--${flag} ${text === undefined ? "is required" : `${JSON.stringify(text)}: not an ISO-8601 time`} (e.g. 2026-03-29T02:00 in the job's time zone, or 2026-03-29T00:00Z)`,
        EXIT.usage,
      );
    return edgeInstant(at, job.timezone, flag);
  };
  const from = edge("from", o.from);
  const to = edge("to", o.to);
  if (to < from)
    throw new CliError(`--to ${o.to} is before --from ${o.from}: nothing to backfill`, EXIT.usage);

  const now = Date.now();
  // What each slot's runs came to, read before anything runs (a dry run only reads).
  const reader = await openStoreOrEmpty(config);
  let runs;
  try {
    runs = reader ? await reader.slotRuns(job.name, from, Math.min(to, now)) : [];
  } finally {
    await reader?.close();
  }
  const plan = planBackfill(job, from, to, runs, now, max);
  if (plan.kind === "too-many")
    throw new CliError(
      `cronvisor: refused: more than ${max} slots of ${job.name} from ${iso(from)} to ${iso(to)} have no ok run (--max ${max}); nothing was run. Narrow the range or raise --max.`,
      EXIT.usage,
    );
  const later =
    plan.future > 0
      ? `; ${plan.future > max ? `more than ${max}` : plan.future} slot(s) after now left to the schedule`
      : "";
  const summary = `${job.name}: ${plan.run.length} slot(s) to run from ${iso(from)} to ${iso(to)}, ${plan.done.length} already ok${later}`;
  if (o.dryRun) {
    out(summary);
    for (const s of plan.run) out(`would run  ${iso(s.slot)}`);
    for (const s of plan.done) out(`already ok ${iso(s)}`);
    return;
  }
  if (plan.run.length === 0) {
    out(`${summary}: nothing to run`);
    return;
  }
  await checkSafe(config);
  const { refuseElsewhere } = await import("./run.js");
  await refuseElsewhere(config, job);
  out(summary);
  const { supervised } = await import("./run.js");
  process.exitCode = await supervised(config, (ctx) =>
    runSlots(ctx, job, plan.run, o.keepGoing === true),
  );
}

/** The slots one at a time; the exit code: 0 all ok, 1 a run failed, 75 the lock was held. */
async function runSlots(
  ctx: RunContext,
  job: JobConfig,
  slots: readonly { slot: number; attempt: number }[],
  keepGoing: boolean,
): Promise<number> {
  const { launch } = await import("../run/execute.js");
  const { heldMessage, lockedMessage } = await import("./run.js");
  // A live line on a terminal only: a log or a pipe gets one line per slot.
  const tty = process.stdout.isTTY === true;
  let stopping: string | null = null;
  let current: { terminate: (reason: string) => void } | null = null;
  const stop = (): void => {
    stopping = "killed: cronvisor backfill was interrupted";
    current?.terminate(stopping);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  let failed = 0;
  let ran = 0;
  try {
    for (const [i, { slot, attempt }] of slots.entries()) {
      if (stopping !== null) break;
      if (tty) process.stdout.write(`\r\x1b[K[${i + 1}/${slots.length}] ${iso(slot)} running`);
      const opts = { slot, trigger: "backfill", attempt, stamp: false } as const;
      // A slot no daemon has recorded is claimed (a daemon's catch-up then finds it taken); one
      // that has a disposition (missed, skipped, a failed run) runs again on its own record.
      let res = await launch(ctx, job, { ...opts, claimSlot: true });
      if (res.kind === "duplicate") res = await launch(ctx, job, { ...opts, claimSlot: false });
      if (res.kind === "locked") {
        if (tty) process.stdout.write("\r\x1b[K");
        process.stderr.write(
          lockedMessage(ctx.config, job, res.holder, `cronvisor backfill ${job.name} ...`),
        );
        return EXIT.busy;
      }
      if (res.kind === "held") {
        if (tty) process.stdout.write("\r\x1b[K");
        process.stderr.write(heldMessage(ctx.config, job, res.reason));
        return EXIT.busy;
      }
      if (res.kind !== "started") return EXIT.busy;
      current = res.handle;
      const row = await res.finished;
      current = null;
      ran++;
      const code = runExitCode({ status: row.status, exitCode: row.exit_code, signal: row.signal });
      if (tty) process.stdout.write("\r\x1b[K");
      out(
        `[${i + 1}/${slots.length}] ${iso(slot)}: run ${row.id} ${row.status}${row.reason ? ` (${row.reason})` : ""}`,
      );
      if (code === 0) continue;
      failed++;
      if (!keepGoing) break;
    }
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
  }
  const left = slots.length - ran;
  out(
    `${job.name}: ${ran - failed} ok, ${failed} failed${left > 0 ? `, ${left} not run${stopping ? " (interrupted)" : failed > 0 ? " (stopped at the first failure; --keep-going runs on)" : ""}` : ""}; see: cronvisor history ${job.name} -c ${ctx.config.file}`,
  );
  return failed > 0 || stopping !== null ? EXIT.fail : EXIT.ok;
}

// `cronvisor run JOB`: run a job now, under the same lock and records as a tick. It waits and
// exits with the job's code, or (--no-wait) hands the run to a detached `cronvisor run`.
import type { Config, JobConfig } from "../core/types.js";
import type { RunContext } from "../run/execute.js";
import type { RunRow } from "../store/store.js";
import { EXIT, runExitCode } from "../core/exit.js";
import { checkSafe, CliError, findJob, load, openStore, out } from "./shared.js";

export async function run(name: string, o: { config?: string; wait: boolean }): Promise<void> {
  const config = await load(o.config);
  const job = findJob(config, name);
  await checkSafe(config);
  await refuseElsewhere(config, job);
  process.exitCode = o.wait ? await runNow(config, job) : await runDetached(config, job);
}

/** A job whose `hosts:` leave this node out is refused here, as the daemon leaves it (exit 2). */
export async function refuseElsewhere(config: Config, job: JobConfig): Promise<void> {
  const { storeTarget } = await import("../store/store.js");
  const { runsOn } = await import("../core/hosts.js");
  const node = storeTarget(config).node;
  if (!runsOn(job, node))
    throw new CliError(
      `cronvisor: refused: ${job.name} may run only on ${(job.hosts ?? []).join(", ")} (hosts: in ${config.file}), and this is node ${node}; nothing was run`,
      EXIT.usage,
    );
}

/**
 * What `run` and `backfill` start runs under: containment, the store and a marker broker of this
 * process (it supervises the runs, whether or not a daemon runs), closed when `fn` is done.
 */
export async function supervised<T>(
  config: Config,
  fn: (ctx: RunContext) => Promise<T>,
): Promise<T> {
  const { startTimeOf } = await import("../core/proc.js");
  // Contained as the daemon's runs are: in its subtree of cgroups where it has one.
  const { setupContainment } = await import("../run/cgroup.js");
  setupContainment(config.stateDir, false);
  // Checked like the daemon's: a run must not write its records into a corrupt store.
  const store = await openStore(config, true, true);
  const { startBroker, BrokerError } = await import("../markers/broker.js");
  let broker;
  try {
    const { storeTarget } = await import("../store/store.js");
    broker = await startBroker(
      config.stateDir,
      `run-${process.pid}.sock`,
      undefined,
      undefined,
      storeTarget(config),
    );
  } catch (e) {
    await store.close();
    if (e instanceof BrokerError) throw new CliError(`cronvisor: ${e.message}`, EXIT.usage);
    throw e;
  }
  // Named locks and the group as a tick takes them; a run started by hand never waits (daemon/admit.ts).
  const { decideAdmission } = await import("../daemon/admit.js");
  try {
    const owner = { pid: process.pid, start: startTimeOf(process.pid) };
    return await fn({
      config,
      store,
      owner,
      now: Date.now,
      broker,
      admit: (j, o) => (f) =>
        decideAdmission({ policy: j.overlap, trigger: o.trigger, waiting: false }, f),
    });
  } finally {
    await broker.close();
    await store.close();
  }
}

/** What to do next, not only why: a first `run` often meets the run its schedule started. */
export function lockedMessage(config: Config, job: JobConfig, h: RunRow, again: string): string {
  const c = `-c ${config.file}`;
  return `cronvisor: ${job.name} is running: run ${h.id} (pid ${h.pid ?? "-"}, since ${new Date(h.started_at).toISOString()}) holds the lock; nothing was started.
  watch it:    cronvisor logs ${job.name} --follow ${c}
  then again:  ${again} ${c}\n`;
}

/** A named lock or the job's group is taken (daemon/admit.ts says by whom). */
export function heldMessage(config: Config, job: JobConfig, reason: string): string {
  return `cronvisor: ${job.name} not started: ${reason}; nothing was started.\n  see: cronvisor status -c ${config.file}\n`;
}

async function runNow(config: Config, job: JobConfig): Promise<number> {
  const { launch } = await import("../run/execute.js");
  return supervised(config, async (ctx) => {
    const res = await launch(ctx, job, {
      slot: null,
      claimSlot: false,
      trigger: "manual",
      attempt: 1,
      echo: process.stdout,
    });
    if (res.kind === "locked") {
      process.stderr.write(lockedMessage(config, job, res.holder, `cronvisor run ${job.name}`));
      return EXIT.busy;
    }
    if (res.kind === "held") {
      process.stderr.write(heldMessage(config, job, res.reason));
      return EXIT.busy;
    }
    if (res.kind !== "started") return EXIT.busy;
    // Ctrl-C or a TERM to `cronvisor run` stops the job's whole group and still records the run.
    const stop = (): void => res.handle.terminate("killed: cronvisor run was interrupted");
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
    const row = await res.finished;
    process.stderr.write(
      `cronvisor: run ${row.id} of ${job.name}: ${row.status}${row.reason ? ` (${row.reason})` : ""}\n`,
    );
    return runExitCode({ status: row.status, exitCode: row.exit_code, signal: row.signal });
  });
}

async function runDetached(config: Config, job: JobConfig): Promise<number> {
  const { spawn } = await import("node:child_process");
  // A detached `cronvisor run` owns the run, so its end is recorded even though we return now.
  const child = spawn(
    process.execPath,
    [process.argv[1] as string, "run", job.name, "-c", config.file],
    {
      detached: true,
      stdio: "ignore",
      env: process.env,
    },
  );
  child.unref();
  out(
    `started ${job.name} in the background (pid ${child.pid}); see: cronvisor history ${job.name} -c ${config.file}`,
  );
  return EXIT.ok;
}

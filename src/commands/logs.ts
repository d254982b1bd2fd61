// `cronvisor logs JOB`: print a run's log (default: the latest run that has one).
import fs from "node:fs";
import { positiveInt } from "./args.js";
import { loadForReading } from "./running-config.js";
import { copyLog } from "./follow.js";
import { EXIT } from "../core/exit.js";
import { CliError, findJob, openStoreOrEmpty } from "./shared.js";

export async function logs(
  job: string,
  o: { config?: string; run?: string; follow?: boolean },
): Promise<void> {
  const { config } = await loadForReading(o.config);
  findJob(config, job);
  const runId = o.run === undefined ? null : positiveInt(o.run, "--run");
  const store = await openStoreOrEmpty(config);
  const run = store
    ? runId === null
      ? (await store.history(job, 50)).find((r) => r.log_path !== null)
      : await store.run(runId)
    : undefined;
  if (!store || !run || run.job !== job || run.log_path === null) {
    await store?.close();
    throw new CliError(
      runId === null ? `no runs of ${job} yet` : `no run ${runId} of ${job}`,
      EXIT.fail,
    );
  }
  // A run of another node of a shared store: its file is there; the store keeps its last 64 KiB.
  if (store.shared && run.node !== null && run.node !== store.node) {
    const tail = await store.logTail(run.id);
    await store.close();
    if (tail === null)
      throw new CliError(
        `cronvisor: run ${run.id} of ${job} ran on node ${run.node}${run.status === "running" ? " and is still running" : ""}; its log is there (${run.log_path}), and the store has none of it ${run.status === "running" ? "yet" : "(that node keeps none with log_tails: false)"}`,
        EXIT.fail,
      );
    process.stderr.write(
      `cronvisor: run ${run.id} ran on node ${run.node}: the last ${tail.length} bytes of its log, as the store keeps them (the whole log is ${run.log_path} there)\n`,
    );
    process.stdout.write(tail);
    return;
  }
  // A finished run's log that is no longer there is said, not printed as an empty log. (A running
  // run's log may not be made yet: copyLog waits for it.)
  // Nor is anything but a regular file printed: a link planted there is never followed.
  const st = fs.lstatSync(run.log_path, { throwIfNoEntry: false });
  const why = st
    ? st.isFile()
      ? null
      : "is not a regular file (a link?); it is not read"
    : "is gone (removed past logs.max_total, or moved since the run)";
  if (why !== null && (st || run.status !== "running")) {
    await store.close();
    throw new CliError(
      `cronvisor: the log file ${run.log_path} of run ${run.id} of ${job} ${why}`,
      EXIT.fail,
    );
  }
  await store.close();
  // Each poll opens the store afresh: a read-only open of a store at rest is a copy taken at
  // that moment (see openReadonly), which would never see the run end.
  const running = async (): Promise<boolean> => {
    const s = await openStoreOrEmpty(config);
    try {
      return (await s?.run(run.id))?.status === "running";
    } finally {
      await s?.close();
    }
  };
  await copyLog(run.log_path, o.follow ?? false, running);
}

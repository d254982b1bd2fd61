// `cronvisor logs JOB`: print a run's log (default: the latest run that has one).
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
  await copyLog(
    run.log_path,
    o.follow ?? false,
    async () => (await store.run(run.id))?.status === "running",
  );
  await store.close();
}

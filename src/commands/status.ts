// `cronvisor status [JOB]`: daemon liveness and per-job progress and health, from the state store.
// What monitoring runs every minute: bin/cronvisor reaches it without commander (see fastStatus).
import type { StatusConfig } from "../core/types.js";
import type { StatusOptions } from "./args.js";
import type { StatusReport } from "../health/status.js";
import type { RunRow } from "../store/store.js";
import { diskFacts } from "../core/disk.js";
import { EXIT } from "../core/exit.js";
import { loadForReading } from "./running-config.js";
import { CliError, findJob, openStatusStoreOrEmpty, out, outJson } from "./shared.js";

export async function status(jobName: string | null, o: StatusOptions): Promise<void> {
  // The store's and health's modules start loading before the config is checked: Node's ESM
  // loader reads each module file through the thread pool, and those reads then overlap the
  // check's work instead of following it (4 ms of a call on 1,000 jobs, BENCHMARKS.md). A call
  // whose config fails never awaits them.
  const storeModule = import("../store/store.js");
  const healthModule = import("../health/status.js");
  for (const m of [storeModule, healthModule]) m.catch(() => {});
  // `--check` answers for monitoring (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) whatever goes wrong:
  // its first output line is the verdict, the human status follows as detail.
  const verdict = (why: string, code: number = EXIT.unknown): void => {
    out(`${code === EXIT.critical ? "CRITICAL" : "UNKNOWN"}: ${why}`);
    process.exitCode = code;
  };
  let config: StatusConfig;
  let fileErrors: string[] | null;
  try {
    ({ config, fileErrors } = await loadForReading(o.config, true));
  } catch (e) {
    if (o.check && e instanceof CliError) {
      process.stderr.write(`${e.message}\n`);
      return verdict("the config cannot be read");
    }
    throw e;
  }
  if (jobName) findJob(config, jobName);
  const { StoreError } = await storeModule;
  const { buildStatus, checkCode, checkSummary } = await healthModule;
  let read: { report: StatusReport; detail: RunRow[] } | null = null;
  // A store at rest is read where it lies; a writer that wrote the file meanwhile (a checkpoint)
  // makes the read start again, from what that writer left (its -wal, or a copy). The last try
  // is never in place: what it reads is then never a mix of two states of the file.
  for (let attempt = 1; read === null; attempt++) {
    let store;
    try {
      store = await openStatusStoreOrEmpty(config, attempt < 3);
    } catch (e) {
      // A store that exists but cannot be read (empty, foreign, corrupt) stops the daemon too:
      // CRITICAL. A busy one, or one at an older schema that the daemon has not yet brought
      // forward (an upgrade before its restart): UNKNOWN.
      if (o.check && e instanceof StoreError) {
        const unknown = e.code === "busy" || e.code === "old";
        return verdict(e.message, unknown ? EXIT.unknown : EXIT.critical);
      }
      throw e;
    }
    if (!store) {
      if (o.check)
        return verdict(`no state store in ${config.stateDir} (has the daemon ever run?)`);
      throw new CliError(
        `no state store in ${config.stateDir}: the daemon has never run`,
        EXIT.unknown,
      );
    }
    let failure: unknown = null;
    try {
      const disk = diskFacts(config.stateDir, config.store === null);
      const now = Date.now();
      const report = await buildStatus(config, store, now, jobName, fileErrors, undefined, disk);
      read = { report, detail: jobName ? await store.history(jobName, 10) : [] };
    } catch (e) {
      failure = e;
    } finally {
      await store.close();
    }
    if (attempt < 3 && store.changedSinceOpen?.()) {
      read = null;
      continue;
    }
    if (failure === null) break;
    // Pages that fail only when read (a store corrupted in the middle): the daemon cannot run
    // on it either. One line, no stack.
    const msg = `cannot read the state store in ${config.stateDir}: ${(failure as Error).message}`;
    if (o.check) return verdict(msg, EXIT.critical);
    throw new CliError(`cronvisor: ${msg}`, EXIT.fail);
  }
  const { report, detail } = read as NonNullable<typeof read>;
  // The daemon was told to run on an open database: each status tries its door again (root only).
  if (config.store !== null && config.allowOpenDatabase) {
    const { checkDoor } = await import("../store/pg-door.js");
    report.daemon.open_database = (await checkDoor(config.store))?.open ?? null;
  }
  // The code first: a reader that stops after the verdict line (`| head -1`) must not change it.
  if (o.check) process.exitCode = checkCode(report, config);
  if (o.check && !o.json) out(checkSummary(report, config));
  if (o.json) outJson(report);
  else {
    const { renderStatus } = await import("../health/render.js");
    // hasColors() is false with NO_COLOR, NODE_DISABLE_COLORS or TERM=dumb (and honours FORCE_COLOR).
    const color = Boolean(process.stdout.isTTY) && process.stdout.hasColors();
    out(renderStatus(report, detail, { color }));
  }
}

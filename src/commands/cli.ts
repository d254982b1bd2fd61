// Commander wiring only: parse arguments, call the module that owns the work, map errors to the
// exit codes in DESIGN.md. Heavy modules are imported lazily, per command.
import type { Command } from "commander";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import type { Config, ConfigError, JobConfig } from "../core/types.js";

// commander (and the node:child_process it loads) costs ~25 ms of start-up: loaded only when a
// command goes through it, which a plain `status` call does not (see fastStatus).
const requireCjs = createRequire(import.meta.url);
const commander = (): typeof import("commander") => requireCjs("commander");

/** Exit codes from the contract. */
const EXIT = { ok: 0, fail: 1, usage: 2, unknown: 3, busy: 75 } as const;

class CliError extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

function configPath(opt: string | undefined): string {
  return path.resolve(opt ?? process.env.CRONVISOR_CONFIG ?? "jobs.yaml");
}

/**
 * Load and validate the config. `cached`: take the state dir's copy of a validated config when it
 * matches the file exactly (only `status` does; see src/config-cache.ts).
 */
async function load(opt: string | undefined, cached = false): Promise<Config> {
  const file = configPath(opt);
  return valid(
    cached
      ? await (await import("../config/config-cache.js")).loadConfigCached(file)
      : (await import("../config/config.js")).loadConfig(file),
  );
}

/** The config, or a usage error listing every problem. */
async function valid(res: { config: Config | null; errors: ConfigError[] }): Promise<Config> {
  if (!res.config) {
    const { formatConfigError } = await import("../core/types.js");
    throw new CliError(res.errors.map(formatConfigError).join("\n"), EXIT.usage);
  }
  return res.config;
}

function findJob(config: Config, name: string): JobConfig {
  const job = config.jobs.find((j) => j.name === name);
  if (!job) {
    const names = config.jobs.map((j) => j.name).join(", ");
    throw new CliError(
      `no job named ${JSON.stringify(name)} in ${config.file} (jobs: ${names || "none"})`,
      EXIT.usage,
    );
  }
  return job;
}

async function openStore(config: Config, create = false, check = false) {
  const store = await import("../store/store.js");
  return store.openStore(config.stateDir, { create, busyTimeoutMs: 5000, check });
}

const withConfig = (cmd: Command): Command =>
  cmd.option("-c, --config <file>", "config file (default: $CRONVISOR_CONFIG, then ./jobs.yaml)");

const out = (s: string): void => {
  process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);
};

function table(rows: string[][]): string {
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return rows
    .map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  "))
    .join("\n");
}

const when = (iso: string | null): string =>
  iso === null ? "-" : iso.replace("T", " ").replace(/\.\d{3}Z$/, "Z");

export function buildProgram(): Command {
  const program = new (commander().Command)();
  program
    .name("cronvisor")
    .description(
      "A cron replacement: locked runs, run records and logs, durable done-markers, and a status that tells liveness from progress.",
    )
    .version("0.1.0")
    .enablePositionalOptions()
    .showHelpAfterError()
    .addHelpText(
      "after",
      "\nExample:\n  cronvisor validate -c jobs.yaml && cronvisor daemon -c jobs.yaml",
    );

  withConfig(program.command("daemon"))
    .description("run the supervisor in the foreground (systemd runs it)")
    .addHelpText("after", "\nExample:\n  cronvisor daemon -c /etc/cronvisor/jobs.yaml")
    .action(async (o: { config?: string }) => {
      await runDaemon(configPath(o.config));
    });

  withConfig(program.command("validate"))
    .description("check the config; print every error, or each job's next fire times")
    .addHelpText("after", "\nExample:\n  cronvisor validate -c jobs.yaml")
    .action(async (o: { config?: string }) => {
      const config = await load(o.config);
      const { nextSlots } = await import("../schedule/schedule.js");
      const now = new Date();
      const rows = [["JOB", "TIMEZONE", "NEXT"]];
      for (const j of config.jobs) {
        const next =
          j.pattern === null
            ? "@reboot (once per boot)"
            : nextSlots(j, now, 3)
                .map((d) => d.toISOString())
                .join(", ");
        rows.push([j.name, j.timezone, next]);
      }
      out(`${config.file}: ok, ${config.jobs.length} job(s)`);
      out(table(rows));
    });

  withConfig(program.command("status [job]"))
    .description("daemon liveness and per-job progress and health, from the state store")
    .option("--json", "machine-readable output")
    .option("--check", "exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (for monitoring)")
    .addHelpText("after", "\nExample:\n  cronvisor status --check || echo unhealthy")
    .action(
      async (
        jobName: string | undefined,
        o: { config?: string; json?: boolean; check?: boolean },
      ) => {
        await status(jobName ?? null, o);
      },
    );

  withConfig(program.command("run <job>"))
    .description("run a job now, under the same lock and records as a tick; prints its output")
    .option("--no-wait", "start it and return at once")
    .addHelpText("after", "\nExample:\n  cronvisor run backup -c jobs.yaml")
    .action(async (name: string, o: { config?: string; wait: boolean }) => {
      const config = await load(o.config);
      const job = findJob(config, name);
      process.exitCode = o.wait ? await runNow(config, job) : await runDetached(config, job);
    });

  withConfig(program.command("reload"))
    .description("ask the running daemon to re-read its config (as SIGHUP does)")
    .addHelpText("after", "\nExample:\n  cronvisor reload -c jobs.yaml")
    .action(async (o: { config?: string }) => {
      await reload(configPath(o.config));
    });

  withConfig(program.command("history [job]"))
    .description("runs and slot dispositions, newest first")
    .option("--limit <n>", "how many", "20")
    .option("--json", "machine-readable output")
    .addHelpText("after", "\nExample:\n  cronvisor history backup --limit 5")
    .action(
      async (
        jobName: string | undefined,
        o: { config?: string; limit: string; json?: boolean },
      ) => {
        const config = await load(o.config);
        if (jobName) findJob(config, jobName);
        const limit = positiveInt(o.limit, "--limit");
        const store = await openStoreOrEmpty(config);
        const { historyEntry } = await import("../health/status.js");
        const rows = store ? (await store.history(jobName ?? null, limit)).map(historyEntry) : [];
        const events = store ? await store.events(jobName ?? null, limit) : [];
        await store?.close();
        if (o.json) return out(JSON.stringify(rows, null, 2));
        const t = [
          ["RUN", "JOB", "STATUS", "TRIGGER", "SLOT", "STARTED", "DURATION", "MARKERS", "REASON"],
        ];
        for (const r of rows) {
          t.push([
            String(r.run_id),
            r.job,
            r.status,
            r.trigger ?? "-",
            when(r.slot),
            when(r.started_at),
            r.duration_ms === null ? "-" : `${(r.duration_ms / 1000).toFixed(1)}s`,
            `${r.markers_new} new/${r.markers_skipped} done`,
            r.reason ?? (r.exit_code !== null ? `exit ${r.exit_code}` : ""),
          ]);
        }
        out(rows.length === 0 ? "no runs recorded" : table(t));
        if (events.length > 0) {
          out("\nEVENTS");
          out(
            table(
              events.map((e) => [
                when(new Date(e.at).toISOString()),
                e.job ?? "-",
                e.kind,
                e.detail ?? "",
              ]),
            ),
          );
        }
      },
    );

  withConfig(program.command("logs <job>"))
    .description("print a run's log (default: the latest run)")
    .option("--run <id>", "run id")
    .option("-f, --follow", "keep printing while the run goes on")
    .addHelpText("after", "\nExample:\n  cronvisor logs backup --follow")
    .action(async (name: string, o: { config?: string; run?: string; follow?: boolean }) => {
      const config = await load(o.config);
      findJob(config, name);
      await logs(
        config,
        name,
        o.run === undefined ? null : positiveInt(o.run, "--run"),
        o.follow ?? false,
      );
    });

  withConfig(program.command("next [job]"))
    .description("upcoming fire times in the job's time zone")
    .option("--count <n>", "how many per job", "5")
    .option("--json", "machine-readable output")
    .addHelpText("after", "\nExample:\n  cronvisor next backup --count 10")
    .action(
      async (
        jobName: string | undefined,
        o: { config?: string; count: string; json?: boolean },
      ) => {
        const config = await load(o.config);
        const jobs = jobName ? [findJob(config, jobName)] : config.jobs;
        const count = positiveInt(o.count, "--count");
        const { nextSlots } = await import("../schedule/schedule.js");
        const now = new Date();
        const list = jobs.map((j) => ({
          job: j.name,
          timezone: j.timezone,
          next: nextSlots(j, now, count).map((d) => d.toISOString()),
        }));
        if (o.json) return out(JSON.stringify(list, null, 2));
        for (const j of list) {
          const cfg = jobs.find((x) => x.name === j.job) as JobConfig;
          out(`${j.job} (${cfg.schedule}, ${j.timezone})`);
          if (cfg.pattern === null) out("  @reboot: once per machine boot");
          for (const t of j.next) out(`  ${t}  ${localTime(t, j.timezone)}`);
        }
      },
    );

  for (const [name, args, desc, example] of [
    [
      "mark",
      "[keys...]",
      "record done-markers durably (fsync'd) before exiting 0",
      "cronvisor mark invoice-42",
    ],
    [
      "check",
      "<key>",
      "exit 0 if KEY is marked, 1 if not",
      "cronvisor check invoice-42 || send-invoice 42",
    ],
    [
      "once",
      "<key> [cmd...]",
      "run CMD only if KEY is not marked; mark KEY right after CMD exits 0",
      "cronvisor once upload-7 -- ./upload.sh 7",
    ],
    [
      "progress",
      "[message]",
      "report progress for the current run",
      'cronvisor progress "row 118 of 200"',
    ],
  ] as const) {
    const cmd = withConfig(program.command(`${name} ${args}`))
      .description(`${desc}; inside a job it needs no options`)
      .option("--job <name>", "the job's namespace (outside a run)")
      .addHelpText("after", `\nExample:\n  ${example}`)
      // Not passThroughOptions: `--job NAME` may follow the key (`check KEY --job NAME`); once's
      // CMD comes after `--`, where commander stops reading options. markerCommand reads the
      // arguments from argv itself, so their order is kept.
      .allowUnknownOption(true);
    if (name === "mark")
      cmd.option("--stdin", "one key per line; each is acknowledged on stdout when it is on disk");
    if (name === "once")
      cmd.option("--wait", "wait for another `once` holding KEY instead of exiting 75");
    cmd.action(async (...a: unknown[]) => {
      const o = a[a.length - 2] as { config?: string; job?: string };
      await markerCommand(name, o);
    });
  }

  withConfig(program.command("pause <job>"))
    .description("stop firing a job (its slots are recorded skipped); survives daemon restarts")
    .addHelpText("after", "\nExample:\n  cronvisor pause backup")
    .action(async (name: string, o: { config?: string }) => setPaused(name, o, true));
  withConfig(program.command("resume <job>"))
    .description("fire a paused job again")
    .addHelpText("after", "\nExample:\n  cronvisor resume backup")
    .action(async (name: string, o: { config?: string }) => setPaused(name, o, false));

  withConfig(program.command("markers <job>"))
    .description("list a job's done-markers")
    .option("--json", "machine-readable output")
    .addHelpText("after", "\nExample:\n  cronvisor markers enrich --json")
    .action(async (name: string, o: { config?: string; json?: boolean }) => {
      const config = await load(o.config);
      findJob(config, name);
      const store = await openStoreOrEmpty(config);
      const list = ((await store?.markers(name)) ?? []).map((m) => ({
        key: m.key,
        run_id: m.run_id,
        fence: m.fence,
        created_at: new Date(m.created_at).toISOString(),
      }));
      await store?.close();
      if (o.json) return out(JSON.stringify(list, null, 2));
      out(
        list.length === 0
          ? `no markers for ${name}`
          : table([
              ["KEY", "RUN", "MARKED AT"],
              ...list.map((m) => [m.key, String(m.run_id ?? "-"), when(m.created_at)]),
            ]),
      );
    });

  withConfig(program.command("unmark <job> <key>"))
    .description("remove one marker (an operator's reconcile; recorded in history's events)")
    .addHelpText("after", "\nExample:\n  cronvisor unmark enrich task-118")
    .action(async (name: string, key: string, o: { config?: string }) => {
      const config = await load(o.config);
      findJob(config, name);
      const store = await openStore(config, true);
      const removed = await store.removeMarker(
        name,
        key,
        Date.now(),
        `${process.env.USER ?? "operator"} pid ${process.pid}`,
      );
      await store.close();
      out(removed ? `unmarked ${key} in ${name}` : `${key} was not marked in ${name}`);
    });

  program
    .command("import-crontab [file]")
    .description("translate a crontab (user or system format) into jobs YAML on stdout")
    .option("--system", "the crontab has a user column (/etc/crontab, /etc/cron.d)")
    .option("--skip-invalid", "turn unparseable lines into comments instead of failing")
    .addHelpText("after", "\nExample:\n  crontab -l | cronvisor import-crontab - > jobs.yaml")
    .action(async (file: string | undefined, o: { system?: boolean; skipInvalid?: boolean }) => {
      const { importCrontab } = await import("../crontab/crontab.js");
      // fd 0, not /dev/stdin: a pipe from spawn() cannot be reopened by path.
      const text = fs.readFileSync(file === undefined || file === "-" ? 0 : file, "utf8");
      const res = importCrontab(text, {
        file: file ?? "-",
        system: o.system,
        skipInvalid: o.skipInvalid,
      });
      for (const w of res.warnings) process.stderr.write(`cronvisor: ${w}\n`);
      if (res.errors.length > 0) {
        throw new CliError(
          // Each message already names its line ("line 7: ...").
          res.errors.map((e) => `${file ?? "-"}: ${e.message}`).join("\n"),
          EXIT.usage,
        );
      }
      process.stdout.write(res.yaml);
    });

  return program;
}

function positiveInt(v: string, flag: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0)
    throw new CliError(`${flag} must be a positive integer, got ${JSON.stringify(v)}`, EXIT.usage);
  return n;
}

function localTime(isoTime: string, timeZone: string): string {
  return new Date(isoTime).toLocaleString("sv-SE", { timeZone, timeZoneName: "short" });
}

async function openStoreOrEmpty(config: Config) {
  const { StoreError } = await import("../store/store.js");
  try {
    return await openStore(config);
  } catch (e) {
    if (e instanceof StoreError && e.code === "missing") return null;
    throw e;
  }
}

async function runDaemon(file: string): Promise<void> {
  const { loadConfigCacheable } = await import("../config/config.js");
  const { formatConfigError } = await import("../core/types.js");
  const { Supervisor, DaemonBusyError } = await import("../daemon/supervisor.js");
  const { StoreError } = await import("../store/store.js");
  const { checkOwnership } = await import("../config/safety.js");
  const { UnsafeError } = await import("../config/safety.js");
  const loaded = loadConfigCacheable(file);
  const config = await valid(loaded.result);
  try {
    checkOwnership(config);
  } catch (e) {
    if (e instanceof UnsafeError) throw new CliError(e.message, EXIT.usage);
    throw e;
  }
  // Alerts, pings and the HTTP endpoint observe the daemon through hooks (src/monitor.ts).
  const hooks = await monitorHooks(config);
  const sup = new Supervisor({
    config,
    hooks,
    loadConfig: () => {
      const { result: r, saveCache } = loadConfigCacheable(file);
      if (r.config) {
        try {
          checkOwnership(r.config);
        } catch (e) {
          return { config: null, errors: [(e as Error).message] };
        }
        saveCache();
      }
      return { config: r.config, errors: r.errors.map(formatConfigError) };
    },
  });
  try {
    sup.start();
  } catch (e) {
    if (e instanceof DaemonBusyError || e instanceof StoreError)
      throw new CliError(e.message, EXIT.fail);
    throw e;
  }
  // Only now, with the store open and ours: nothing is written next to a store we refused.
  loaded.saveCache();
  let signals = 0;
  const onStop = (sig: string): void => {
    signals++;
    if (signals === 1) {
      process.stderr.write(`cronvisor: ${sig}: stopping (again to force)\n`);
      void sup.stop().then(() => process.exit(0));
    } else {
      process.stderr.write(`cronvisor: ${sig} again: killing every run now\n`);
      sup.force();
    }
  };
  process.on("SIGTERM", () => onStop("SIGTERM"));
  process.on("SIGINT", () => onStop("SIGINT"));
  process.on("SIGHUP", () => sup.reload());
  await new Promise<never>(() => {});
}

async function monitorHooks(config: Config) {
  const { createMonitor } = await import("../monitor/monitor.js");
  try {
    return await createMonitor(config);
  } catch (e) {
    // A configured endpoint that cannot listen is an error at start, not a silent gap in monitoring.
    throw new CliError(`cronvisor: ${(e as Error).message}`, EXIT.fail);
  }
}

async function runNow(config: Config, job: JobConfig): Promise<number> {
  const { launch } = await import("../run/execute.js");
  const { startTimeOf } = await import("../run/proc.js");
  // Checked like the daemon's: a run must not write its records into a corrupt store.
  const { LegacyStore } = await import("../daemon/legacy-store.js");
  const store = LegacyStore.open(config.stateDir, {
    create: true,
    busyTimeoutMs: 5000,
    check: true,
  });
  try {
    const res = launch(
      {
        config,
        store,
        owner: { pid: process.pid, start: startTimeOf(process.pid) },
        now: Date.now,
      },
      job,
      { slot: null, claimSlot: false, trigger: "manual", attempt: 1, echo: process.stdout },
    );
    if (res.kind === "locked") {
      const h = res.holder;
      process.stderr.write(
        `cronvisor: ${job.name} is running: run ${h.id} (pid ${h.pid ?? "-"}, since ${new Date(h.started_at).toISOString()}) holds the lock\n`,
      );
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
    return exitCodeOf(row.status, row.exit_code, row.signal);
  } finally {
    store.close();
  }
}

/** The job's exit code; for runs that did not exit by themselves, the codes timeout(1) and shells use. */
function exitCodeOf(status: string, exitCode: number | null, signal: string | null): number {
  if (exitCode !== null) return exitCode;
  if (status === "timeout") return 124;
  if (status === "spawn_failed") return 127;
  if (signal) return 128 + ((signal in signalNumbers ? signalNumbers[signal] : 0) ?? 0);
  return EXIT.fail;
}
const signalNumbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

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

async function reload(file: string): Promise<void> {
  const { loadConfig } = await import("../config/config.js");
  const { formatConfigError } = await import("../core/types.js");
  const { isAlive } = await import("../run/proc.js");
  const res = loadConfig(file);
  // Find the daemon through the store of the config's state dir (or, if the new config is
  // broken, there is no state dir to read: say so).
  if (!res.config) {
    throw new CliError(
      `${res.errors.map(formatConfigError).join("\n")}\nthe running daemon keeps its old config`,
      EXIT.usage,
    );
  }
  const store = await openStoreOrEmpty(res.config);
  const d = await store?.daemon();
  await store?.close();
  if (!d || d.pid === null || d.stopped_at !== null || !isAlive(d.pid, d.pid_start)) {
    throw new CliError(`no daemon is running for ${res.config.stateDir}`, EXIT.fail);
  }
  process.kill(d.pid, "SIGHUP");
  out(`sent SIGHUP to daemon ${d.pid}`);
}

async function status(
  jobName: string | null,
  o: { config?: string; json?: boolean; check?: boolean },
): Promise<void> {
  // `--check` answers for monitoring (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN) whatever goes wrong:
  // its first output line is the verdict, the human status follows as detail.
  const verdict = (why: string, code: number = EXIT.unknown): void => {
    out(`${code === 2 ? "CRITICAL" : "UNKNOWN"}: ${why}`);
    process.exitCode = code;
  };
  let config: Config;
  try {
    config = await load(o.config, true);
  } catch (e) {
    if (o.check && e instanceof CliError) {
      process.stderr.write(`${e.message}\n`);
      return verdict("the config cannot be read");
    }
    throw e;
  }
  if (jobName) findJob(config, jobName);
  const { StoreError } = await import("../store/store.js");
  let store;
  try {
    store = await openStoreOrEmpty(config);
  } catch (e) {
    // A store that exists but cannot be read stops the daemon too: CRITICAL. A busy one: UNKNOWN.
    if (o.check && e instanceof StoreError) {
      return verdict(e.message, e.code === "busy" ? EXIT.unknown : 2);
    }
    throw e;
  }
  if (!store) {
    if (o.check) return verdict(`no state store in ${config.stateDir} (has the daemon ever run?)`);
    throw new CliError(
      `no state store in ${config.stateDir}: the daemon has never run`,
      EXIT.unknown,
    );
  }
  const { buildStatus, checkCode, checkSummary } = await import("../health/status.js");
  let report;
  let detail;
  try {
    report = await buildStatus(config, store, Date.now(), jobName);
    detail = jobName ? await store.history(jobName, 10) : [];
  } catch (e) {
    // Pages that fail only when read (a store corrupted in the middle): the daemon cannot run
    // on it either. One line, no stack.
    const msg = `cannot read the state store in ${config.stateDir}: ${(e as Error).message}`;
    if (o.check) return verdict(msg, 2);
    throw new CliError(`cronvisor: ${msg}`, EXIT.fail);
  } finally {
    await store.close();
  }
  // The code first: a reader that stops after the verdict line (`| head -1`) must not change it.
  if (o.check) process.exitCode = checkCode(report);
  if (o.check && !o.json) out(checkSummary(report));
  if (o.json) out(JSON.stringify(report, null, 2));
  else {
    const { renderStatus } = await import("../health/render.js");
    // hasColors() is false with NO_COLOR, NODE_DISABLE_COLORS or TERM=dumb (and honours FORCE_COLOR).
    const color = Boolean(process.stdout.isTTY) && process.stdout.hasColors();
    out(renderStatus(report, detail, { color }));
  }
}

async function logs(
  config: Config,
  job: string,
  runId: number | null,
  follow: boolean,
): Promise<void> {
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
  let offset = 0;
  const pump = (): void => {
    let fd: number;
    try {
      fd = fs.openSync(run.log_path as string, "r");
    } catch {
      return;
    }
    try {
      const size = fs.fstatSync(fd).size;
      if (size < offset) offset = 0; // the log was rewritten (head + tail at the end of a capped run)
      const buf = Buffer.alloc(64 * 1024);
      while (offset < size) {
        const n = fs.readSync(fd, buf, 0, buf.length, offset);
        if (n <= 0) break;
        process.stdout.write(buf.subarray(0, n));
        offset += n;
      }
    } finally {
      fs.closeSync(fd);
    }
  };
  pump();
  while (follow && (await store.run(run.id))?.status === "running") {
    await new Promise((r) => setTimeout(r, 250));
    pump();
  }
  if (follow) pump();
  await store.close();
}

async function setPaused(name: string, o: { config?: string }, paused: boolean): Promise<void> {
  const config = await load(o.config);
  const job = findJob(config, name);
  const store = await openStore(config, true);
  await store.setPaused(name, paused, Date.now());
  await store.close();
  if (!paused && job.paused)
    out(`note: ${name} has paused: true in ${config.file}; it stays paused until that is removed`);
  out(`${name} ${paused ? "paused" : "resumed"}`);
}

async function markerCommand(name: string, o: { config?: string; job?: string }): Promise<void> {
  const { runMarkerCommand } = await import("../markers/markers-cli.js");
  const argv = process.argv.slice(process.argv.indexOf(name));
  // Drop -c/--config here: the marker commands know only their own options.
  const rest: string[] = [];
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === "--") {
      rest.push(...argv.slice(i));
      break;
    }
    if (a === "-c" || a === "--config") i++;
    else if (a.startsWith("--config=")) continue;
    else rest.push(a);
  }
  let target;
  if (o.job !== undefined) {
    const config = await load(o.config);
    findJob(config, o.job);
    // An operator may mark keys before the daemon's first start: the writing commands create the
    // store, as `pause` and `run` do (`check` on no store is simply "not marked").
    if (name === "mark" || name === "once") await (await openStore(config, true)).close();
    const inRun =
      process.env.CRONVISOR_JOB === o.job &&
      process.env.CRONVISOR_RUN_ID &&
      process.env.CRONVISOR_FENCE;
    target = {
      stateDir: config.stateDir,
      job: o.job,
      run: inRun
        ? { id: Number(process.env.CRONVISOR_RUN_ID), fence: Number(process.env.CRONVISOR_FENCE) }
        : null,
    };
  }
  process.exitCode = await runMarkerCommand([name, ...rest], target);
}

/**
 * `status` is what monitoring runs every minute, so a plain call skips commander: `status [JOB]`
 * with `--json`, `--check`, `-c FILE`, `--config FILE` or `--config=FILE`, each at most once, is
 * read here. Anything else (help, an unknown or repeated option, `--`, an empty or dash-led value)
 * returns null and goes through commander, so its usage errors and help read as before.
 */
function fastStatus(
  args: string[],
): { job: string | null; opts: { config?: string; json?: boolean; check?: boolean } } | null {
  if (args[0] !== "status") return null;
  const opts: { config?: string; json?: boolean; check?: boolean } = {};
  let job: string | null = null;
  for (let i = 1; i < args.length; i++) {
    const a = args[i] as string;
    if (a === "--json" && !opts.json) opts.json = true;
    else if (a === "--check" && !opts.check) opts.check = true;
    else if ((a === "-c" || a === "--config") && opts.config === undefined) {
      const v = args[++i];
      if (v === undefined || v === "" || v.startsWith("-")) return null;
      opts.config = v;
    } else if (a.startsWith("--config=") && a.length > 9 && opts.config === undefined) {
      opts.config = a.slice(9);
    } else if (a !== "" && !a.startsWith("-") && job === null) job = a;
    else return null;
  }
  return { job, opts };
}

export async function main(argv: string[]): Promise<void> {
  // `cronvisor status --check | head -1`: a reader that goes away is not an error of ours.
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw e;
  });
  const fast = fastStatus(argv.slice(2));
  try {
    if (fast) {
      await status(fast.job, fast.opts);
    } else {
      const program = buildProgram();
      program.exitOverride();
      // Subcommands were built before the override and do not inherit it: without their own, a
      // usage error (`check` with no KEY) exits 1, which `check` means as "not marked".
      for (const c of program.commands) c.exitOverride();
      program.configureOutput({ writeErr: (s) => process.stderr.write(s) });
      await program.parseAsync(argv);
    }
  } catch (e) {
    if (!fast && e instanceof commander().CommanderError) {
      const code =
        e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.exitCode === 0
          ? 0
          : EXIT.usage;
      process.exit(code);
    }
    if (e instanceof CliError) {
      process.stderr.write(`${e.message}\n`);
      process.exit(e.code);
    }
    const err = e as Error & { code?: string };
    const { StoreError } = await import("../store/store.js");
    if (e instanceof StoreError) {
      process.stderr.write(`cronvisor: ${err.message}\n`);
      process.exit(e.code === "busy" ? EXIT.busy : EXIT.fail);
    }
    process.stderr.write(`cronvisor: ${err.stack ?? err.message}\n`);
    process.exit(EXIT.fail);
  }
}

// Commander wiring only: the commands, their options and help. Each action imports its
// subcommand's module when that command runs, so start-up loads none of the others.
import type { Command } from "commander";
import { createRequire } from "node:module";
import type { MarkerCommand } from "./mark.js";

// commander (and the node:child_process it loads) costs ~25 ms of start-up: loaded only when a
// command goes through it, which a plain `status` call does not (see fastStatus in args.ts).
const requireCjs = createRequire(import.meta.url);
export const commander = (): typeof import("commander") => requireCjs("commander");

type Opts = { config?: string };

const withConfig = (cmd: Command): Command =>
  cmd.option("-c, --config <file>", "config file (default: $CRONVISOR_CONFIG, then ./jobs.yaml)");

const example = (text: string): string => `\nExample:\n  ${text}`;

/**
 * `version`: src/core/version.ts's VERSION, passed in by cli.ts: this module imports nothing of
 * its own at load time (test/commands-startup.test.js checks it).
 */
export function buildProgram(version: string): Command {
  const program = new (commander().Command)();
  program
    .name("cronvisor")
    .description(
      "A cron replacement: locked runs, run records and logs, durable done-markers, and a status that tells liveness from progress.",
    )
    .version(version)
    .enablePositionalOptions()
    .addHelpText(
      "after",
      example("cronvisor validate -c jobs.yaml && cronvisor daemon -c jobs.yaml"),
    );
  daemonCommands(program);
  readingCommands(program);
  markerCommands(program);
  operatorCommands(program);
  return program;
}

/** The daemon and what talks to it: daemon, validate, plan, status, run, backfill, reload. */
function daemonCommands(program: Command): void {
  withConfig(program.command("daemon"))
    .description("run the supervisor in the foreground (systemd runs it)")
    .addHelpText("after", example("cronvisor daemon -c /etc/cronvisor/jobs.yaml"))
    .action(async (o: Opts) => (await import("./daemon.js")).daemon(o));

  withConfig(program.command("validate"))
    .description("check the config; print every error, or each job's next fire times")
    .addHelpText("after", example("cronvisor validate -c jobs.yaml"))
    .action(async (o: Opts) => (await import("./validate.js")).validate(o));

  withConfig(program.command("plan"))
    .description(
      "what applying the config would change against the one the daemon runs (or last ran)",
    )
    .option("--json", "machine-readable output")
    .addHelpText("after", example("cronvisor plan -c jobs.new.yaml"))
    .action(async (o: Opts & { json?: boolean }) => (await import("./plan.js")).planCommand(o));

  withConfig(program.command("status [job]"))
    .description("daemon liveness and per-job progress and health, from the state store")
    .option("--json", "machine-readable output")
    .option("--check", "exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (for monitoring)")
    .addHelpText("after", example("cronvisor status --check || echo unhealthy"))
    .action(async (job: string | undefined, o: Opts & { json?: boolean; check?: boolean }) =>
      (await import("./status.js")).status(job ?? null, o),
    );

  withConfig(program.command("run <job>"))
    .description("run a job now, under the same lock and records as a tick; prints its output")
    .option("--no-wait", "start it and return at once")
    .addHelpText("after", example("cronvisor run backup -c jobs.yaml"))
    .action(async (name: string, o: Opts & { wait: boolean }) =>
      (await import("./run.js")).run(name, o),
    );

  withConfig(program.command("backfill <job>"))
    .description(
      "run each slot of a range that has no ok run, oldest first, one at a time, under the lock",
    )
    .requiredOption("--from <time>", "first slot (ISO-8601; without an offset, the job's zone)")
    .requiredOption("--to <time>", "last slot, included")
    .option("--dry-run", "list the slots, run nothing")
    .option("--max <n>", "refuse more slots than this (nothing runs)", "100")
    .option("--keep-going", "run the other slots after a failed one")
    .addHelpText(
      "after",
      example("cronvisor backfill enrich --from 2026-03-01T00:00 --to 2026-03-03T23:59 --dry-run"),
    )
    .action(async (name: string, o: import("./backfill.js").BackfillOptions) =>
      (await import("./backfill.js")).backfill(name, o),
    );

  withConfig(program.command("reload"))
    .description("ask the running daemon to re-read its config (as SIGHUP does)")
    .addHelpText("after", example("cronvisor reload -c jobs.yaml"))
    .action(async (o: Opts) => (await import("./reload.js")).reload(o));
}

/** What the store and the schedule say: history, logs, why, next. */
function readingCommands(program: Command): void {
  withConfig(program.command("history [job]"))
    .description("runs and slot dispositions, newest first")
    .option("--limit <n>", "how many", "20")
    .option("--json", "machine-readable output")
    .addHelpText("after", example("cronvisor history backup --limit 5"))
    .action(async (job: string | undefined, o: Opts & { limit: string; json?: boolean }) =>
      (await import("./history.js")).history(job, o),
    );

  withConfig(program.command("logs <job>"))
    .description("print a run's log (default: the latest run)")
    .option("--run <id>", "run id")
    .option("-f, --follow", "keep printing while the run goes on")
    .addHelpText("after", example("cronvisor logs backup --follow"))
    .action(async (name: string, o: Opts & { run?: string; follow?: boolean }) =>
      (await import("./logs.js")).logs(name, o),
    );

  withConfig(program.command("why <job>"))
    .description("what became of the slot nearest TIME (default: the latest), and why")
    .option("--at <time>", "ISO-8601; without an offset, in the job's time zone")
    .option("--json", "machine-readable output")
    .addHelpText("after", example("cronvisor why backup --at 2026-03-29T02:00"))
    .action(async (name: string, o: Opts & { at?: string; json?: boolean }) =>
      (await import("./why.js")).why(name, o),
    );

  withConfig(program.command("next [job]"))
    .description("upcoming fire times in the job's time zone")
    .option("--count <n>", "how many per job", "5")
    .option("--json", "machine-readable output")
    .addHelpText("after", example("cronvisor next backup --count 10"))
    .action(async (job: string | undefined, o: Opts & { count: string; json?: boolean }) =>
      (await import("./next.js")).next(job, o),
    );
}

const MARKER_COMMANDS: readonly (readonly [MarkerCommand, string, string, string])[] = [
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
];

/** mark, check, once, progress: what a job calls (bin/cronvisor takes the in-job calls itself). */
function markerCommands(program: Command): void {
  for (const [name, args, desc, text] of MARKER_COMMANDS) {
    const cmd = withConfig(program.command(`${name} ${args}`))
      .description(`${desc}; inside a job it needs no options`)
      .option("--job <name>", "the job's namespace (outside a run)")
      .addHelpText("after", example(text))
      // Not passThroughOptions: `--job NAME` may follow the key (`check KEY --job NAME`); once's
      // CMD comes after `--`, where commander stops reading options. markerCommand reads the
      // arguments from argv itself, so their order is kept.
      .allowUnknownOption(true);
    if (name === "mark")
      cmd.option("--stdin", "one key per line; each is acknowledged on stdout when it is on disk");
    if (name === "once")
      cmd.option("--wait", "wait for another `once` holding KEY instead of exiting 75");
    cmd.action(async (...a: unknown[]) => {
      const o = a[a.length - 2] as Opts & { job?: string };
      await (await import("./mark.js")).markerCommand(name, o);
    });
  }
}

/** An operator's changes and tools: pause, resume, markers, unmark, backup, restore, import-crontab. */
function operatorCommands(program: Command): void {
  type PauseOpts = Opts & { all?: boolean; until?: string; reason?: string };
  withConfig(program.command("pause [job]"))
    .description(
      "stop firing a job (its slots are recorded skipped); --all drains: nothing new starts, running runs finish; survives daemon restarts",
    )
    .option("--all", "every job (drain); docs/chains-and-maintenance.md")
    .option("--until <time>", "with --all: end the drain by itself (2h, or an ISO-8601 time)")
    .option("--reason <text>", "with --all: said in status and in each skipped slot")
    .addHelpText(
      "after",
      example('cronvisor pause backup\n  cronvisor pause --all --until 2h --reason "db upgrade"'),
    )
    .action(async (name: string | undefined, o: PauseOpts) =>
      (await import("./pause.js")).pause(name, o),
    );
  withConfig(program.command("resume [job]"))
    .description("fire a paused job again; --all ends the drain")
    .option("--all", "end the drain of `pause --all`")
    .addHelpText("after", example("cronvisor resume backup\n  cronvisor resume --all"))
    .action(async (name: string | undefined, o: PauseOpts) =>
      (await import("./pause.js")).resume(name, o),
    );

  withConfig(program.command("markers <job>"))
    .description("list a job's done-markers (or a namespace no job owns any more); move them")
    .option("--json", "machine-readable output")
    .option("--move-to <new>", "carry a renamed job's markers over to job NEW")
    .addHelpText("after", example("cronvisor markers enrich --json"))
    .action(async (name: string, o: Opts & { json?: boolean; moveTo?: string }) =>
      (await import("./markers.js")).markers(name, o),
    );

  withConfig(program.command("unmark <job> <key>"))
    .description("remove one marker (an operator's reconcile; recorded in history's events)")
    .addHelpText("after", example("cronvisor unmark enrich task-118"))
    .action(async (name: string, key: string, o: Opts) =>
      (await import("./markers.js")).unmark(name, key, o),
    );

  withConfig(program.command("backup <dest>"))
    .description("copy the store to DEST (a new file) while the daemon runs; docs/store.md")
    .addHelpText("after", example("cronvisor backup /var/backups/cronvisor-$(date +%F).db"))
    .action(async (dest: string, o: Opts) => (await import("./backup.js")).backup(dest, o));
  withConfig(program.command("restore <src>"))
    .description(
      "replace the store with a backup (daemon stopped; the old store is kept beside it)",
    )
    .addHelpText("after", example("cronvisor restore /var/backups/cronvisor-2026-03-29.db"))
    .action(async (src: string, o: Opts) => (await import("./backup.js")).restore(src, o));

  program
    .command("import-crontab [file]")
    .description("translate a crontab (user or system format) into jobs YAML on stdout")
    .option("--system", "the crontab has a user column (/etc/crontab, /etc/cron.d)")
    .option("--skip-invalid", "turn unparseable lines into comments instead of failing")
    .addHelpText("after", example("crontab -l | cronvisor import-crontab - > jobs.yaml"))
    .action(async (file: string | undefined, o: { system?: boolean; skipInvalid?: boolean }) =>
      (await import("./import-crontab.js")).importCrontabCommand(file, o),
    );
}

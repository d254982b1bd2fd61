// The CLI's entry (bin/cronvisor): a plain `status` call straight to its command, anything else
// through commander (program.ts); errors mapped to the exit codes in src/core/exit.ts.
import { fastStatus } from "./args.js";
import { CliError, EXIT } from "./shared.js";

export async function main(argv: string[]): Promise<void> {
  // `cronvisor status --check | head -1`: a reader that goes away is not an error of ours.
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(process.exitCode ?? EXIT.ok);
    throw e;
  });
  const fast = fastStatus(argv.slice(2));
  try {
    if (fast) await (await import("./status.js")).status(fast.job, fast.opts);
    else await parse(argv);
  } catch (e) {
    await fail(e, fast !== null);
  }
}

async function parse(argv: string[]): Promise<void> {
  const [{ buildProgram }, { VERSION }] = await Promise.all([
    import("./program.js"),
    import("../core/version.js"),
  ]);
  const program = buildProgram(VERSION);
  program.exitOverride();
  // Subcommands were built before the override and do not inherit it: without their own, a
  // usage error (`check` with no KEY) exits 1, which `check` means as "not marked".
  for (const c of program.commands) c.exitOverride();
  program.configureOutput({ writeErr: (s) => process.stderr.write(s) });
  await program.parseAsync(argv);
}

/** Exit with the code an error means; only an unexpected one prints its stack. */
async function fail(e: unknown, fast: boolean): Promise<never> {
  if (!fast && e instanceof (await import("./program.js")).commander().CommanderError) {
    const code =
      e.code === "commander.helpDisplayed" || e.code === "commander.version" || e.exitCode === 0
        ? EXIT.ok
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

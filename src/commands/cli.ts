// The CLI's entry (bin/cronvisor): a plain `status` call straight to its command, anything else
// through commander (program.ts); errors mapped to the exit codes in src/core/exit.ts. Whatever goes
// wrong with the input or the machine is one line on stderr naming the thing, never a stack: only
// a bug (an error nothing here knows) prints its stack.
import { fastStatus } from "./args.js";
import { CliError, EXIT, printable, printableLines, systemFailure } from "./shared.js";

export async function main(argv: string[]): Promise<void> {
  // `cronvisor status --check | head -1`: a reader that goes away is not an error of ours.
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(process.exitCode ?? EXIT.ok);
    throw e;
  });
  const fast = fastStatus(argv.slice(2));
  try {
    if (fast) {
      // The config cache's module is asked for beside status's own: Node's ESM loader reads
      // module files through the thread pool, and the two sets of reads then overlap instead of
      // following each other (status.ts does the same for health's and the store's modules).
      // In the bundle bin/cronvisor runs (scripts/bundle.js) they are one chunk: a no-op there.
      import("../config/config-cache.js").catch(() => {});
      await (await import("./status.js")).status(fast.job, fast.opts);
    } else await parse(argv);
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
  const output = {
    writeErr: (s: string) => process.stderr.write(s),
    // One line: commander puts a suggestion ("(Did you mean status?)") on a line of its own, and
    // quotes the argument it refuses, which may hold anything.
    outputError: (s: string, write: (s: string) => void) =>
      write(`${printable(s.trim().replace(/\n+/g, " "))}\n`),
  };
  for (const c of [program, ...program.commands]) c.exitOverride().configureOutput(output);
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
    process.stderr.write(`${printableLines(e.message)}\n`);
    process.exit(e.code);
  }
  const err = e as Error & { code?: string };
  const { StoreError } = await import("../store/store.js");
  if (e instanceof StoreError) {
    process.stderr.write(`cronvisor: ${printable(err.message)}\n`);
    process.exit(e.code === "busy" ? EXIT.busy : EXIT.fail);
  }
  const system = systemFailure(e);
  if (system !== null) {
    process.stderr.write(`${printable(system)}\n`);
    process.exit(EXIT.fail);
  }
  process.stderr.write(`cronvisor: ${err.stack ?? err.message}\n`);
  process.exit(EXIT.fail);
}

// What `once` does around its claim, for the library (`Markers#once`) and the CLI alike: the one
// claim-wait loop, and the command it runs with the terminal's stdio. The CLI loads it only for
// `once`, and node:child_process is loaded only to run the command: a `mark` call pays for
// neither (BENCHMARKS.md, "mark KEY").
import { EXIT, signalExitCode } from "../core/exit.js";
import { ClaimHeldError } from "./target.js";

/** Take a claim; with `wait`, try again every 100 ms while another live process holds it. */
export async function untilClaimed(
  take: () => "done" | "claimed" | Promise<"done" | "claimed">,
  wait: boolean,
): Promise<"done" | "claimed"> {
  for (;;) {
    try {
      return await take();
    } catch (e) {
      if (!(e instanceof ClaimHeldError) || !wait) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Run argv with the terminal's stdio; resolves to its exit code (128+N when killed by signal N). */
export async function runCommand(
  argv: string[],
  onSpawn: (pid: number) => void = () => {},
): Promise<number> {
  const { spawn } = await import("node:child_process");
  return new Promise((resolve) => {
    const [cmd, ...args] = argv;
    const child = spawn(cmd as string, args, { stdio: "inherit" });
    if (child.pid !== undefined) onSpawn(child.pid);
    child.on("error", (e) => {
      process.stderr.write(`cronvisor: cannot run ${cmd}: ${e.message}\n`);
      resolve((e as NodeJS.ErrnoException).code === "ENOENT" ? EXIT.notFound : EXIT.cannotExecute);
    });
    child.on("exit", (code, signal) => {
      if (code !== null) resolve(code);
      else resolve(signalExitCode(signal ?? ""));
    });
  });
}

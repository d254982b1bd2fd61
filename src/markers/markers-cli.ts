// `mark`, `check`, `once`, `progress`: the commands a job calls, often thousands of times. This
// entry point loads only the marker code and SQLite (no commander, croner or yaml) so a call
// costs little more than Node's own start-up.
import {
  ClaimHeldError,
  FenceError,
  Markers,
  UsageError,
  checkKey,
  isBusy,
  runCommand,
  targetFromEnv,
  type MarkersTarget,
} from "./markers.js";

const USAGE: Record<string, string> = {
  mark: "usage: cronvisor mark KEY... | cronvisor mark --stdin",
  check: "usage: cronvisor check KEY",
  once: "usage: cronvisor once [--wait] KEY -- CMD [ARG...]",
  progress: "usage: cronvisor progress [MESSAGE]",
};

/**
 * argv: [command, ...args]. `target` is given by the full CLI for `--job NAME` outside a run;
 * inside a run it comes from the environment.
 */
export async function main(argv: string[], target?: MarkersTarget): Promise<never> {
  const code = await runMarkerCommand(argv, target);
  process.exit(code);
}

export async function runMarkerCommand(argv: string[], target?: MarkersTarget): Promise<number> {
  const [cmd = "", ...rest] = argv;
  let m: Markers | null = null;
  try {
    const args = stripJobOption(rest);
    m = Markers.open(target ?? targetFromEnv());
    switch (cmd) {
      case "mark":
        return await mark(m, args);
      case "check": {
        if (args.length !== 1) throw new UsageError(USAGE.check as string);
        return m.isDone(args[0] as string) ? 0 : 1;
      }
      case "once":
        return await once(m, args);
      case "progress": {
        if (args.length > 1) throw new UsageError(USAGE.progress as string);
        m.progress(args[0] ?? null);
        return 0;
      }
      default:
        throw new UsageError(`unknown marker command ${JSON.stringify(cmd)}`);
    }
  } catch (e) {
    return fail(e);
  } finally {
    m?.close();
  }
}

/** `--job NAME` is resolved by the full CLI; drop it here. */
function stripJobOption(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--") {
      out.push(...args.slice(i));
      break;
    }
    if (args[i] === "--job") i++;
    else if (args[i]?.startsWith("--job=")) continue;
    else out.push(args[i] as string);
  }
  return out;
}

async function mark(m: Markers, args: string[]): Promise<number> {
  if (args[0] === "--stdin") {
    if (args.length !== 1) throw new UsageError(USAGE.mark as string);
    // Group commit: the lines that have arrived are committed in one transaction (one fsync),
    // then acknowledged on stdout, so a pipeline knows exactly which keys are durable. A bad
    // line first commits and acknowledges the good lines before it, then stops.
    const readline = await import("node:readline"); // only here: `mark KEY` starts faster
    const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    await new Promise<void>((resolve, reject) => {
      let batch: string[] = [];
      let failed = false;
      const flush = (): void => {
        const keys = batch;
        batch = [];
        if (keys.length === 0 || failed) return;
        m.markDone(...keys);
        process.stdout.write(`${keys.join("\n")}\n`);
      };
      const fail = (e: unknown): void => {
        failed = true;
        reject(e); // before close(): it emits "close" at once, whose resolve() must not win
        rl.close();
      };
      rl.on("line", (line) => {
        if (failed || line === "") return;
        try {
          checkKey(line);
        } catch (e) {
          try {
            flush();
          } catch (e2) {
            return fail(e2);
          }
          return fail(e);
        }
        if (batch.push(line) === 1) {
          setImmediate(() => {
            try {
              flush();
            } catch (e) {
              fail(e);
            }
          });
        }
      });
      rl.on("close", () => {
        try {
          flush();
          resolve();
        } catch (e) {
          fail(e);
        }
      });
    });
    return 0;
  }
  if (args.length === 0 || args.some((a) => a.startsWith("--")))
    throw new UsageError(USAGE.mark as string);
  m.markDone(...args);
  return 0;
}

async function once(m: Markers, args: string[]): Promise<number> {
  let wait = false;
  if (args[0] === "--wait") {
    wait = true;
    args = args.slice(1);
  }
  const sep = args.indexOf("--");
  const key = args[0];
  if (key === undefined || sep !== 1 || args.length < 3) throw new UsageError(USAGE.once as string);
  checkKey(key);
  const argv = args.slice(2);
  for (;;) {
    try {
      if (m.claim(key) === "done") {
        process.stderr.write(`cronvisor: ${key} already done; not running it again\n`);
        return 0;
      }
      break;
    } catch (e) {
      if (!(e instanceof ClaimHeldError) || !wait) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  const code = await runCommand(argv, (pid) => m.noteClaimCommand(key, pid));
  if (code === 0) {
    // Right after the side effect: nothing that comes later can undo this.
    m.completeClaim(key);
  } else {
    m.releaseClaim(key);
  }
  return code;
}

function fail(e: unknown): number {
  const msg = (e as Error).message ?? String(e);
  if (e instanceof UsageError || e instanceof FenceError || e instanceof ClaimHeldError) {
    process.stderr.write(`cronvisor: ${msg}\n`);
    return e.exitCode;
  }
  if (isBusy(e)) {
    process.stderr.write(`cronvisor: the state store stayed busy past its timeout: ${msg}\n`);
    return 75;
  }
  process.stderr.write(`cronvisor: ${msg}\n`);
  return 1;
}

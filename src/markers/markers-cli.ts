// `mark`, `check`, `once`, `progress`: the commands a job calls, often thousands of times. This
// entry point loads only the marker code and SQLite (no commander, croner or yaml) so a call
// costs little more than Node's own start-up.
import {
  ClaimHeldError,
  FenceError,
  UsageError,
  checkKey,
  claimResult,
  isBusy,
  runCommand,
  staleFence,
  targetFromEnv,
  untilClaimed,
  type MarkersTarget,
} from "./markers.js";
import { EXIT } from "../core/exit.js";
import { isAlive, startTimeOf } from "../run/proc.js";
import { StoreError, type MarkerStore } from "../store/store.js";
import { BrokerCallError, openMarkerPath } from "./broker-client.js";

/** The store and the writer (a run with its fence, or an operator) of one marker command. */
interface Session {
  store: MarkerStore;
  t: MarkersTarget;
}

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
  let m: Session | null = null;
  try {
    const args = stripJobOption(rest);
    const t = target ?? targetFromEnv();
    // Inside a run with a broker, through it (a job of any user); otherwise the store itself.
    m = { store: await openMarkerPath(t, target === undefined), t };
    switch (cmd) {
      case "mark":
        return await mark(m, args);
      case "check": {
        if (args.length !== 1) throw new UsageError(USAGE.check as string);
        return (await m.store.isDone(m.t, checkKey(args[0] as string))) ? EXIT.ok : EXIT.fail;
      }
      case "once":
        return await once(m, args);
      case "progress": {
        if (args.length > 1) throw new UsageError(USAGE.progress as string);
        if (m.t.run === null)
          throw new UsageError("progress is reported by a run: call it inside a cronvisor job");
        await m.store.progress(m.t.run.id, args[0] ?? null, Date.now());
        return EXIT.ok;
      }
      default:
        throw new UsageError(`unknown marker command ${JSON.stringify(cmd)}`);
    }
  } catch (e) {
    return fail(e, cmd);
  } finally {
    await m?.store.close();
  }
}

/** Mark keys done in one transaction; a stale fence writes nothing and throws FenceError. */
async function markDone(m: Session, keys: string[]): Promise<void> {
  keys.forEach(checkKey);
  if ((await m.store.markDone(m.t, keys, Date.now())) === null) throw staleFence(m.t);
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

async function mark(m: Session, args: string[]): Promise<number> {
  if (args[0] === "--stdin") {
    if (args.length !== 1) throw new UsageError(USAGE.mark as string);
    // Group commit: the lines that have arrived are committed in one transaction (one fsync),
    // then acknowledged on stdout, so a pipeline knows exactly which keys are durable. A bad
    // line first commits and acknowledges the good lines before it, then stops.
    const readline = await import("node:readline"); // only here: `mark KEY` starts faster
    const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    await new Promise<void>((resolve, reject) => {
      let batch: string[] = [];
      let stopped = false; // a bad line or a failure: no later line is taken
      let failed = false;
      // One commit at a time, in arrival order: a batch is taken when its flush is called.
      let chain: Promise<void> = Promise.resolve();
      const flush = (): Promise<void> => {
        const keys = batch;
        batch = [];
        if (keys.length === 0) return chain;
        chain = chain.then(async () => {
          if (failed) return;
          await markDone(m, keys);
          process.stdout.write(`${keys.join("\n")}\n`);
        });
        return chain;
      };
      const fail = (e: unknown): void => {
        stopped = failed = true;
        reject(e); // before close(): it emits "close" at once, whose resolve() must not win
        rl.close();
      };
      rl.on("line", (line) => {
        if (stopped || line === "") return;
        try {
          checkKey(line);
        } catch (e) {
          stopped = true;
          flush().then(() => fail(e), fail);
          return;
        }
        if (batch.push(line) === 1) setImmediate(() => flush().catch(fail));
      });
      rl.on("close", () => {
        flush().then(resolve, fail);
      });
    });
    return EXIT.ok;
  }
  if (args.length === 0 || args.some((a) => a.startsWith("--")))
    throw new UsageError(USAGE.mark as string);
  await markDone(m, args);
  return EXIT.ok;
}

async function once(m: Session, args: string[]): Promise<number> {
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
  const me = { pid: process.pid, start: startTimeOf(process.pid) };
  const take = async (): Promise<"done" | "claimed"> =>
    claimResult(m.t, key, await m.store.takeClaim(m.t, key, me, Date.now(), isAlive));
  if ((await untilClaimed(take, wait)) === "done") {
    process.stderr.write(`cronvisor: ${key} already done; not running it again\n`);
    return EXIT.ok;
  }
  const code = await runCommand(argv, (pid) => noteClaimCommand(m, key, me.pid, pid));
  if (code === EXIT.ok) {
    // Right after the side effect: nothing that comes later can undo this.
    if (!(await m.store.completeClaim(m.t, key, me.pid, Date.now()))) throw staleFence(m.t);
  } else {
    await m.store.releaseClaim(m.t.job, key, me.pid);
  }
  return code;
}

/** Record the process a claim's command runs in (see ClaimRow). Best effort. */
function noteClaimCommand(m: Session, key: string, pid: number, cmdPid: number): void {
  try {
    m.store.setClaimCommand(m.t.job, key, pid, cmdPid, startTimeOf(cmdPid)).catch(() => {
      // a busy or full store: the claim is still held by this process while it lives
    });
  } catch {
    // startTimeOf failed: the claim is still held by this process while it lives
  }
}

function fail(e: unknown, cmd: string): number {
  const msg = (e as Error).message ?? String(e);
  if (
    e instanceof UsageError ||
    e instanceof FenceError ||
    e instanceof ClaimHeldError ||
    e instanceof BrokerCallError
  ) {
    process.stderr.write(`cronvisor: ${msg}\n`);
    return e.exitCode;
  }
  if (isBusy(e)) {
    process.stderr.write(`cronvisor: the state store stayed busy past its timeout: ${msg}\n`);
    return EXIT.busy;
  }
  process.stderr.write(`cronvisor: ${msg}\n`);
  // `check` fails closed: 1 means "not marked", so "cannot tell" (no access, an unreadable
  // store) is 69. No store at all is "nothing marked yet".
  const missing = e instanceof StoreError && e.code === "missing";
  return cmd === "check" && !missing ? EXIT.unavailable : EXIT.fail;
}

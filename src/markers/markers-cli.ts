// `mark`, `check`, `once`, `progress`: the commands a job calls, often thousands of times. This
// entry point loads only what its path needs, each module file and builtin costing start-up
// (BENCHMARKS.md, "mark KEY"): at import, the arguments, the errors and the exit table; then
// either the broker's client (node:net, no store module) or the store's marker path (SQLite);
// `once`'s command and /proc only for `once`. Never commander, croner or yaml.
import fs from "node:fs";
import { EXIT } from "../core/exit.js";
import { printable } from "../core/printable.js";
import {
  StoreError,
  openMarkerStore,
  storeFailure,
  storePath,
  type MarkerStore,
} from "../store/store.js";
import {
  BrokerCallError,
  ClaimHeldError,
  FenceError,
  UsageError,
  checkKey,
  claimResult,
  isBusy,
  staleFence,
  targetFromEnv,
  type MarkersTarget,
} from "./target.js";

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

/** A marker command's arguments, read before the store is opened (pure: see parseMarkerArgs). */
type Parsed =
  | { cmd: "help"; usage: string }
  | { cmd: "mark"; keys: string[]; stdin: boolean }
  | { cmd: "check"; key: string }
  | { cmd: "once"; key: string; argv: string[]; wait: boolean }
  | { cmd: "progress"; message: string | null };

export async function runMarkerCommand(argv: string[], target?: MarkersTarget): Promise<number> {
  const [cmd = "", ...rest] = argv;
  let m: Session | null = null;
  let stateDir: string | null = null;
  let inRun = false;
  try {
    const p = parseMarkerArgs(cmd, stripJobOption(rest));
    if (p.cmd === "help") {
      process.stdout.write(`${p.usage}\n`);
      return EXIT.ok;
    }
    const t = target ?? targetFromEnv();
    stateDir = t.stateDir;
    inRun = t.run !== null;
    // Inside a run with a broker, through it (a job of any user); otherwise the store itself,
    // which `check` outside a run only reads (inside one it counts a done key as skipped work).
    const fromEnv = target === undefined;
    if (!(fromEnv && process.env.CRONVISOR_BROKER)) checkStateDir(t.stateDir);
    const readonly = p.cmd === "check" && t.run === null;
    m = { store: await openMarkerPath(t, fromEnv, readonly), t };
    switch (p.cmd) {
      case "mark":
        return p.stdin ? await markStdin(m) : (await markDone(m, p.keys), EXIT.ok);
      case "check":
        return (await m.store.isDone(m.t, p.key)) ? EXIT.ok : EXIT.fail;
      case "once":
        return await once(m, p.key, p.argv, p.wait);
      default: // progress
        if (m.t.run === null)
          throw new UsageError("progress is reported by a run: call it inside a cronvisor job");
        // Fenced on every path, as through a broker: a process left over after its run ended is
        // refused (exit 3) and writes nothing.
        if (!(await m.store.reportProgress(m.t, p.message, Date.now()))) throw staleFence(m.t);
        return EXIT.ok;
    }
  } catch (e) {
    const code = fail(e, stateDir);
    return cmd === "check" ? checkCode(e, code, inRun) : code;
  } finally {
    await m?.store.close();
  }
}

/**
 * Read a marker command's arguments (after `--job` was taken out). `-h`/`--help` is the usage;
 * any other dash-led argument before `--` that the command does not know is a usage error, never
 * a key (`--` ends the options: `check -- -7` checks the key `-7`). Keys are checked here, so a
 * bad call opens nothing.
 */
export function parseMarkerArgs(cmd: string, args: string[]): Parsed {
  const usage = USAGE[cmd];
  if (usage === undefined) throw new UsageError(`unknown marker command ${JSON.stringify(cmd)}`);
  const end = args.indexOf("--");
  const opts = end === -1 ? args : args.slice(0, end);
  if (opts.some((a) => a === "-h" || a === "--help")) return { cmd: "help", usage };
  const known = cmd === "mark" ? "--stdin" : cmd === "once" ? "--wait" : null;
  const flag = (a: string) => a.length > 1 && a.startsWith("-") && a !== "--";
  if (opts.some((a) => flag(a) && a !== known)) throw new UsageError(usage);
  const has = opts.includes(known ?? "");
  if (cmd === "once") {
    // once [--wait] KEY -- CMD [ARG...]: exactly one key before the first `--`.
    const keys = opts.filter((a) => a !== "--wait");
    const cmdArgv = end === -1 ? [] : args.slice(end + 1);
    if (keys.length !== 1 || cmdArgv.length === 0) throw new UsageError(usage);
    return { cmd, key: checkKey(keys[0] as string), argv: cmdArgv, wait: has };
  }
  // After `--` everything is an argument, dashes or not.
  const positional = [
    ...opts.filter((a) => a !== known),
    ...(end === -1 ? [] : args.slice(end + 1)),
  ];
  if (cmd === "mark") {
    if (has ? positional.length !== 0 : positional.length === 0) throw new UsageError(usage);
    return { cmd, keys: positional.map(checkKey), stdin: has };
  }
  if (cmd === "check") {
    if (positional.length !== 1) throw new UsageError(usage);
    return { cmd, key: checkKey(positional[0] as string) };
  }
  if (positional.length > 1) throw new UsageError(usage);
  return { cmd: "progress", message: positional[0] ?? null };
}

/**
 * The marker path of one command: through the broker inside a run that has one; the store
 * itself otherwise (an operator's `--job`, or a run started before the broker existed).
 */
async function openMarkerPath(
  t: MarkersTarget,
  inRun: boolean,
  readonly: boolean,
): Promise<MarkerStore> {
  const socket = process.env.CRONVISOR_BROKER;
  if (inRun && socket) {
    const { BrokerClient } = await import("./broker-client.js");
    return new BrokerClient(socket, process.env.CRONVISOR_SECRET ?? "");
  }
  return openMarkerStore(t.stateDir, { create: false, readonly, busyTimeoutMs: 5000 });
}

/** A state dir that is a file (not a directory) cannot hold a store: said as such. */
function checkStateDir(dir: string): void {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    return; // missing: openMarkerStore says "no state store"
  }
  if (!st.isDirectory()) throw new StoreError(`state dir ${dir} is not a directory`, "io");
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

async function markStdin(m: Session): Promise<number> {
  {
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
}

async function once(m: Session, key: string, argv: string[], wait: boolean): Promise<number> {
  const [{ untilClaimed, runCommand }, { isAlive, startTimeOf }] = await Promise.all([
    import("./once.js"),
    import("../core/proc.js"),
  ]);
  const me = { pid: process.pid, start: startTimeOf(process.pid) };
  const take = async (): Promise<"done" | "claimed"> =>
    claimResult(m.t, key, await m.store.takeClaim(m.t, key, me, Date.now(), isAlive));
  if ((await untilClaimed(take, wait)) === "done") {
    process.stderr.write(`cronvisor: ${key} already done; not running it again\n`);
    return EXIT.ok;
  }
  const code = await runCommand(argv, (pid) =>
    noteClaimCommand(m, key, me.pid, { pid, start: startTimeOf(pid) }),
  );
  if (code === EXIT.ok) {
    // Right after the side effect: nothing that comes later can undo this.
    if (!(await m.store.completeClaim(m.t, key, me.pid, Date.now()))) throw staleFence(m.t);
  } else {
    await m.store.releaseClaim(m.t.job, key, me.pid);
  }
  return code;
}

/** Record the process a claim's command runs in (see ClaimRow). Best effort. */
function noteClaimCommand(
  m: Session,
  key: string,
  pid: number,
  cmd: { pid: number; start: string | null },
): void {
  m.store.setClaimCommand(m.t.job, key, pid, cmd.pid, cmd.start).catch(() => {
    // a busy or full store: the claim is still held by this process while it lives
  });
}

/**
 * One line on stderr (control characters escaped) and the exit code. A store that cannot be used
 * is named, and exits 1; busy past the timeout is 75 (`check`: see checkCode).
 */
function fail(e: unknown, stateDir: string | null): number {
  const say = (msg: string): void => {
    process.stderr.write(`cronvisor: ${printable(msg)}\n`);
  };
  if (
    e instanceof UsageError ||
    e instanceof FenceError ||
    e instanceof ClaimHeldError ||
    e instanceof BrokerCallError
  ) {
    say(e.message);
    return e.exitCode;
  }
  const named = stateDir === null ? null : storeFailure(storePath(stateDir), e);
  const err = named ?? e;
  const msg = (err as Error).message ?? String(err);
  if (isBusy(err)) {
    say(named ? msg : `the state store stayed busy past its timeout: ${msg}`);
    return EXIT.busy;
  }
  say(msg);
  return EXIT.fail;
}

/**
 * `check` exits 0 marked, 1 not marked, 2 usage, and 69 whenever it cannot tell: a store it
 * cannot read (empty, foreign, corrupt, unreadable, busy), a broker that refuses or cannot be
 * reached. Never 1 for those, or `check K || work` would redo work already done. Outside a run,
 * no store at all is "not marked" (nothing was ever marked); inside one it is "cannot tell": the
 * run's store should be there.
 */
function checkCode(e: unknown, code: number, inRun: boolean): number {
  if (e instanceof UsageError) return code;
  if (e instanceof StoreError && e.code === "missing" && !inRun) return EXIT.fail;
  return EXIT.unavailable;
}

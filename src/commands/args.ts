// The arguments the CLI reads by hand, beside commander: a plain `status` call (read before
// commander is even loaded), the marker commands' own argv, and the positive integers of
// --limit, --count and --run. Pure functions of their input.
import { EXIT } from "../core/exit.js";
import { CliError } from "./shared.js";

export interface StatusOptions {
  config?: string;
  json?: boolean;
  check?: boolean;
}

/**
 * `status` is what monitoring runs every minute, so a plain call skips commander: `status [JOB]`
 * with `--json`, `--check`, `-c FILE`, `--config FILE` or `--config=FILE`, each at most once, is
 * read here. Anything else (help, an unknown or repeated option, `--`, an empty or dash-led value)
 * returns null and goes through commander, so its usage errors and help read as before.
 */
export function fastStatus(args: string[]): { job: string | null; opts: StatusOptions } | null {
  if (args[0] !== "status") return null;
  const opts: StatusOptions = {};
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

/**
 * A marker command's arguments after its name, in their order, without -c/--config (the marker
 * commands know only their own options). Everything from `--` on (once's CMD) is kept as it is.
 * `argv` starts at the command's name.
 */
export function markerArgs(argv: string[]): string[] {
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
  return rest;
}

export function positiveInt(v: string, flag: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0)
    throw new CliError(`${flag} must be a positive integer, got ${JSON.stringify(v)}`, EXIT.usage);
  return n;
}

// `cronvisor mark|check|once|progress` outside the fast path of bin/cronvisor: with --job (an
// operator, or a job marking another job's namespace) or without CRONVISOR_STATE_DIR. The work is
// src/markers/markers-cli.ts's; this only finds the target store from the config.
import { markerArgs } from "./args.js";
import { EXIT } from "../core/exit.js";
import { CliError, findJob, load, openStore } from "./shared.js";

export type MarkerCommand = "mark" | "check" | "once" | "progress";

export async function markerCommand(
  name: MarkerCommand,
  o: { config?: string; job?: string },
): Promise<void> {
  const { runMarkerCommand } = await import("../markers/markers-cli.js");
  // From argv itself, not commander's parse: the order of the arguments is kept.
  const rest = markerArgs(process.argv.slice(process.argv.indexOf(name)));
  if (process.env.CRONVISOR_BROKER && o.job !== undefined) {
    // Inside a run, markers go through the broker, and only into the run's own job.
    const own = process.env.CRONVISOR_JOB;
    if (o.job !== own)
      throw new CliError(
        `cronvisor: refused: inside a run of job ${own}, --job may name only ${own}, not ${o.job}; nothing was written`,
        // `check` answers 0, 1, or 69 when it cannot tell; the writing commands are refused (3)
        name === "check" ? EXIT.unavailable : EXIT.unknown,
      );
    process.exitCode = await runMarkerCommand([name, ...rest]);
    return;
  }
  const target = o.job === undefined ? undefined : await jobTarget(name, o.job, o.config);
  process.exitCode = await runMarkerCommand([name, ...rest], target);
}

async function jobTarget(name: MarkerCommand, job: string, configOpt: string | undefined) {
  const config = await load(configOpt);
  findJob(config, job);
  // An operator may mark keys before the daemon's first start: the writing commands create the
  // store, as `pause` and `run` do (`check` on no store is simply "not marked").
  if (name === "mark" || name === "once") await (await openStore(config, true)).close();
  const inRun =
    process.env.CRONVISOR_JOB === job &&
    process.env.CRONVISOR_RUN_ID &&
    process.env.CRONVISOR_FENCE;
  return {
    stateDir: config.stateDir,
    job,
    run: inRun
      ? { id: Number(process.env.CRONVISOR_RUN_ID), fence: Number(process.env.CRONVISOR_FENCE) }
      : null,
  };
}

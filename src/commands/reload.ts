// `cronvisor reload`: send the running daemon SIGHUP, as systemd's ExecReload does.
import { EXIT } from "../core/exit.js";
import type { Config } from "../core/types.js";
import { CliError, configPath, openStoreOrEmpty, out } from "./shared.js";

export async function reload(o: { config?: string }): Promise<void> {
  const file = configPath(o.config);
  const { loadConfig } = await import("../config/config.js");
  const { formatConfigError } = await import("../core/types.js");
  const { isAlive } = await import("../core/proc.js");
  const res = loadConfig(file);
  // Find the daemon through the store of the config's state dir (or, if the new config is
  // broken, there is no state dir to read: say so).
  if (!res.config) {
    throw new CliError(
      // The note on the last error's line: one line when the file itself cannot be read.
      `${res.errors.map(formatConfigError).join("\n")} (the running daemon keeps its old config)`,
      EXIT.usage,
    );
  }
  const store = await openStoreOrEmpty(res.config);
  const d = await store?.daemon();
  const running = await store?.runningConfig().catch(() => null);
  await store?.close();
  if (!d || d.pid === null || d.stopped_at !== null || !isAlive(d.pid, d.pid_start)) {
    throw new CliError(`no daemon is running for ${res.config.stateDir}`, EXIT.fail);
  }
  // What it applies, read before the signal (once the daemon has accepted the file, its record is
  // the file, and the plan would compare the file with itself), and only of the file the daemon
  // re-reads: `-c` may name another file with the same state dir.
  const summary = running?.config_file === file ? await appliedSummary(res.config) : null;
  process.kill(d.pid, "SIGHUP");
  out(`sent SIGHUP to daemon ${d.pid}`);
  // What a reload cannot apply, compared with the config the daemon recorded it runs.
  if (running?.config_json) {
    const { unpackConfig } = await import("../core/config-record.js");
    const { restartOnlyChanges } = await import("../core/restart-only.js");
    let was: Parameters<typeof restartOnlyChanges>[0] | null = null;
    try {
      was = unpackConfig(running.config_json) as Parameters<typeof restartOnlyChanges>[0];
    } catch {
      // an unreadable record: nothing to compare with
    }
    const fixed = was ? restartOnlyChanges(was, res.config) : [];
    if (fixed.length > 0)
      out(
        `not applied until the daemon restarts (\`systemctl restart cronvisor\`, or stop and start \`cronvisor daemon\`):\n${fixed.map((f) => `  ${f}`).join("\n")}`,
      );
  }
  // Then what it applies, job by job (as `plan` shows it).
  if (summary !== null) out(summary);
}

/** `plan`'s summary of the new config against the running one; null if it cannot be made. */
async function appliedSummary(config: Config): Promise<string | null> {
  try {
    const { planFor } = await import("./plan.js");
    const { renderPlan } = await import("./plan-render.js");
    return renderPlan(await planFor(config), config.file);
  } catch {
    return null; // the summary is a courtesy: the reload itself goes on
  }
}

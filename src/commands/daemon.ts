// `cronvisor daemon`: run the supervisor in the foreground (systemd runs it) until a signal.
import type { Config } from "../core/types.js";
import { handleDaemonSignals } from "./daemon-signals.js";
import { EXIT } from "../core/exit.js";
import { CliError, configPath, valid } from "./shared.js";

export async function daemon(o: { config?: string }): Promise<void> {
  const file = configPath(o.config);
  const { loadConfigCacheable } = await import("../config/config.js");
  const { Supervisor, DaemonBusyError } = await import("../daemon/supervisor.js");
  const { StoreError } = await import("../store/store.js");
  const { checkOwnership, UnsafeError } = await import("../config/safety.js");
  const loaded = loadConfigCacheable(file);
  const config = await valid(loaded.result);
  try {
    checkOwnership(config);
  } catch (e) {
    if (e instanceof UnsafeError) throw new CliError(e.message, EXIT.usage);
    throw e;
  }
  // Alerts, pings and the HTTP endpoint observe the daemon through hooks (src/monitor/).
  const hooks = await monitorHooks(config);
  const sup = new Supervisor({
    config,
    hooks,
    configHash: loaded.hash,
    loadConfig: await reloader(file),
  });
  try {
    await sup.start();
  } catch (e) {
    if (e instanceof DaemonBusyError || e instanceof StoreError)
      throw new CliError(e.message, EXIT.fail);
    throw e;
  }
  // Only now, with the store open and ours: nothing is written next to a store we refused.
  loaded.saveCache();
  handleDaemonSignals(sup);
  await new Promise<never>(() => {});
}

/** How the supervisor re-reads the config on reload: checked as at start, cached when valid. */
async function reloader(file: string) {
  const { loadConfigCacheable } = await import("../config/config.js");
  const { formatConfigError } = await import("../core/types.js");
  const { checkOwnership } = await import("../config/safety.js");
  return (): { config: Config | null; errors: string[]; hash: string | null } => {
    const { result: r, saveCache, hash } = loadConfigCacheable(file);
    if (r.config) {
      try {
        checkOwnership(r.config);
      } catch (e) {
        return { config: null, errors: [(e as Error).message], hash };
      }
      saveCache();
    }
    return { config: r.config, errors: r.errors.map(formatConfigError), hash };
  };
}

async function monitorHooks(config: Config) {
  const { createMonitor } = await import("../monitor/monitor.js");
  try {
    return await createMonitor(config);
  } catch (e) {
    // A configured endpoint that cannot listen is an error at start, not a silent gap in monitoring.
    throw new CliError(`cronvisor: ${(e as Error).message}`, EXIT.fail);
  }
}

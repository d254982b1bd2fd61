// `cronvisor daemon`: run the supervisor in the foreground (systemd runs it) until a signal.
import type { Config } from "../core/types.js";
import { handleDaemonSignals } from "./daemon-signals.js";
import { EXIT } from "../core/exit.js";
import { checkSafe, checkStateDir, CliError, configPath, valid } from "./shared.js";

export async function daemon(o: { config?: string }): Promise<void> {
  const file = configPath(o.config);
  const { loadConfigCacheable } = await import("../config/config.js");
  const { Supervisor, DaemonBusyError } = await import("../daemon/supervisor.js");
  const { StoreError, storeFailure, storePath } = await import("../store/store.js");
  const loaded = loadConfigCacheable(file);
  const config = await valid(loaded.result);
  await checkSafe(config);
  await checkDoor(config);
  checkStateDir(config, StoreError);
  // Alerts, pings and the HTTP endpoint observe the daemon through hooks (src/monitor/).
  const hooks = await monitorHooks(config);
  // Jobs of any user reach their markers through the broker (src/markers/broker.ts).
  const { startBroker, BrokerError } = await import("../markers/broker.js");
  const { storeTarget } = await import("../store/store.js");
  const broker = (stateDir: string) =>
    startBroker(stateDir, "daemon.sock", undefined, undefined, storeTarget(config));
  const sup = new Supervisor({
    config,
    hooks,
    configHash: loaded.hash,
    loadConfig: await reloader(file),
    broker,
  });
  const started = sup.start();
  handleDaemonSignals(sup, started);
  try {
    await started;
  } catch (e) {
    if (e instanceof DaemonBusyError || e instanceof StoreError)
      throw new CliError(e.message, EXIT.fail);
    if (e instanceof BrokerError) throw new CliError(`cronvisor: ${e.message}`, EXIT.usage);
    // A store that opened but refuses the first write (read-only, full): named, one line.
    const named = storeFailure(storePath(config.stateDir), e);
    if (named) throw new CliError(`cronvisor: ${named.message}`, EXIT.fail);
    throw e;
  }
  // Only now, with the store open and ours: nothing is written next to a store we refused.
  loaded.saveCache();
  await new Promise<never>(() => {});
}

/**
 * As root, a PostgreSQL store that lets any local user in as its role without a credential
 * (store/pg-door.ts) stops the start (exit 2), unless `allow_open_database: true`: then a warning
 * here, and in every `status` (commands/status.ts).
 */
async function checkDoor(config: Config): Promise<void> {
  if (config.store === null) return;
  const { checkDoor: check } = await import("../store/pg-door.js");
  const door = await check(config.store);
  if (door?.untried) process.stderr.write(`cronvisor: warning: ${door.untried}\n`);
  if (!door?.open) return;
  if (!config.allowOpenDatabase)
    throw new CliError(
      `refusing to run as root: ${door.open}; use peer authentication mapped to root, or scram-sha-256 with a 0600 password_file (docs/safety.md), or set allow_open_database: true to run anyway`,
      EXIT.usage,
    );
  process.stderr.write(`cronvisor: warning: ${door.open} (allow_open_database: true)\n`);
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
  // A taken `http:` port is not fatal: the monitor logs it, shows it in status and retries.
  const { createMonitor } = await import("../monitor/monitor.js");
  return createMonitor(config);
}

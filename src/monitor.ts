// Alerts, pings, metrics and the HTTP endpoint, attached to the daemon through its hooks.
import type { SupervisorHooks } from "./supervisor.js";
import type { Config } from "./types.js";

export function createMonitor(_config: Config): SupervisorHooks | undefined {
  return undefined;
}

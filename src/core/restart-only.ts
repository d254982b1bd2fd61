// The settings a reload cannot change: the daemon holds its state dir and store open, is one
// node of that store, and has bound its http address, all at its start. A reload keeps them as
// they were, says so, and `cronvisor reload` tells the operator to restart.
import type { Config } from "./types.js";

type Fixed = Pick<Config, "stateDir" | "store" | "node" | "http">;

const shown = {
  stateDir: (c: Partial<Fixed>): string => c.stateDir ?? "-",
  store: (c: Partial<Fixed>): string => c.store ?? "SQLite in the state dir",
  node: (c: Partial<Fixed>): string => c.node ?? "the host name",
  http: (c: Partial<Fixed>): string => (c.http ? `${c.http.host}:${c.http.port}` : "none"),
};
const KEYS = { stateDir: "state_dir", store: "store", node: "node", http: "http" } as const;

/**
 * What differs between the config the daemon runs and a new one, among the settings that take
 * effect only at a restart: `http: 127.0.0.1:8080 -> 127.0.0.1:9090`, one per key, in file order.
 */
export function restartOnlyChanges(running: Partial<Fixed>, next: Partial<Fixed>): string[] {
  const out: string[] = [];
  for (const k of ["stateDir", "store", "node", "http"] as const) {
    const [a, b] = [shown[k](running), shown[k](next)];
    if (a !== b) out.push(`${KEYS[k]}: ${a} -> ${b}`);
  }
  return out;
}

/** `next` with the running config's restart-only settings: what a reload applies. */
export function keepRestartOnly<C extends Fixed>(running: Fixed, next: C): C {
  return {
    ...next,
    stateDir: running.stateDir,
    store: running.store,
    node: running.node,
    http: running.http,
  };
}

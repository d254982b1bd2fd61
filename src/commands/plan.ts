// `cronvisor plan [-c FILE] [--json]`: what applying FILE would change, against the config the
// running daemon accepted, else the last one a daemon accepted (recorded in the store), else none.
// It only reads: the store is opened read-only (never created), and nothing is written anywhere.
import type { Config } from "../core/types.js";
import type { Baseline, Plan, PlanFacts } from "../daemon/plan.js";
import type { Store } from "../store/store.js";
import { configPath, openStoreOrEmpty, out, outJson, valid } from "./shared.js";

export async function planCommand(o: { config?: string; json?: boolean }): Promise<void> {
  const file = configPath(o.config);
  const config = await valid((await import("../config/config.js")).loadConfig(file));
  const p = await planFor(config);
  if (o.json) return outJson(p);
  const { renderPlan } = await import("./plan-render.js");
  out(renderPlan(p, file));
}

/** The plan of `config` against its state dir's baseline and facts, read in one open store. */
export async function planFor(config: Config, now = Date.now()): Promise<Plan> {
  const { plan } = await import("../daemon/plan.js");
  const store = await openStoreOrEmpty(config);
  try {
    const baseline = store ? await baselineOf(store, config) : null;
    const facts = store ? await factsOf(store, baseline?.config ?? null) : emptyFacts();
    return plan(baseline ?? { source: "none", at: null, config: null }, config, facts, now);
  } finally {
    await store?.close();
  }
}

/** The config the daemon recorded: its own while it runs, the last accepted one after. */
async function baselineOf(store: Store, config: Config): Promise<Baseline | null> {
  const rec = await store.runningConfig();
  if (rec === null) return null;
  const { unpackConfig } = await import("../core/config-record.js");
  const { checkedConfig } = await import("../config/config-cache.js");
  // The record of whatever file the daemon ran on this state dir: `plan -c new.yaml` compares a
  // candidate file with the daemon's jobs.yaml.
  let recorded: Config | null;
  try {
    recorded = checkedConfig(unpackConfig(rec.config_json), rec.config_file, config.stateDir);
  } catch {
    recorded = null; // an unreadable record: no baseline
  }
  if (recorded === null) return null;
  const { isAlive } = await import("../core/proc.js");
  const runs = rec.stopped_at === null && rec.pid !== null && isAlive(rec.pid, rec.pid_start);
  return { source: runs ? "daemon" : "recorded", at: rec.config_accepted_at, config: recorded };
}

async function factsOf(store: Store, baseline: Pick<Config, "jobs"> | null): Promise<PlanFacts> {
  const { bootId, runAlive } = await import("../core/proc.js");
  const rows = await store.allJobs();
  const running = (await store.runningRuns()).map((r) => ({
    ...r,
    // Another node's run is its node's to judge: it counts as alive here.
    alive: (store.shared && r.node !== null && r.node !== store.node) || runAlive(r),
  }));
  const lastRuns = new Map<string, NonNullable<Awaited<ReturnType<Store["lastRun"]>>>>();
  for (const j of baseline?.jobs ?? []) {
    const last = await store.lastRun(j.name);
    if (last) lastRuns.set(j.name, last);
  }
  return {
    jobs: new Map(rows.map((r) => [r.name, r])),
    running,
    lastRuns,
    markerCounts: await store.markerCounts(),
    bootId: bootId(),
  };
}

function emptyFacts(): PlanFacts {
  return { jobs: new Map(), running: [], lastRuns: new Map(), markerCounts: new Map(), bootId: "" };
}

// The status reader of before migration 006, kept as the oracle of the tests that check that the
// jobs' summary rows give the same status (test/store-contract.test.js, test/store-interface.test.js).
import { digestRecent } from "./digest-oracle.js";
import { SUMMARY_RECENT } from "../dist/store/summary.js";

/**
 * The old reader, kept as the oracle: statusRows computed from the runs and markers tables
 * through the Store's per-query methods (what status read before migration 006), and health's
 * digest made from them by its plain reading (test/digest-oracle.js).
 */
export function fromRuns(store) {
  return new Proxy(store, {
    get(target, prop) {
      if (prop !== "statusRows") {
        const v = target[prop];
        return typeof v === "function" ? v.bind(target) : v;
      }
      return async (jobs, recentLimit) => {
        const out = new Map();
        for (const j of jobs) {
          const all = await target.recentFinished(j.name, Math.max(recentLimit, SUMMARY_RECENT));
          const recent = all.slice(0, recentLimit);
          const since = all[0]?.started_at ?? 0;
          const last = await target.lastRun(j.name);
          const newest = all[0];
          out.set(j.name, {
            row: await target.job(j.name),
            running: await target.runningRuns(j.name),
            recent,
            digest: digestRecent(all),
            attempts: await target.repeatingKeysSince(j.name, j.repeatLimit, since),
            last,
            lastFinished:
              newest === undefined
                ? null
                : last?.id === newest.id
                  ? last
                  : await target.historyRow(newest.id),
            markers: await target.markerCount(j.name),
          });
        }
        return { daemon: await target.daemon(), nodes: await target.nodes(), jobs: out };
      };
    },
  });
}

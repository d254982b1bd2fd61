// Holding a node's lease on a shared store: the I/O around lease.ts's decisions. The lease is
// renewed on its own timer, not through the supervisor's serial queue, so that a tick waiting on
// a store that stopped answering cannot keep the node from noticing that it must fence itself.
import { formatDuration } from "../core/duration.js";
import { FENCED_PREFIX } from "../core/result.js";
import { fenceGraceMs, mustFence, renewEveryMs } from "./lease.js";
import type { Runtime } from "./runtime.js";
import { terminate } from "./stop.js";

export interface Lease {
  stop(): void;
}

/**
 * Renew the lease every beat, and fence this node when renewals have failed for too long: no new
 * run, every run stopped within the lease. A renewal that succeeds again lifts the fence (the
 * slots due meanwhile were other nodes' to run) and calls `resumed`. `renewedFrom`: when the
 * claim that began the lease was sent (performance.now()).
 */
export function holdLease(rt: Runtime, renewedFrom: number, resumed: () => void): Lease {
  const leaseMs = rt.config.leaseMs;
  const node = rt.store.node;
  let last = renewedFrom;
  let renewing = false;
  const fence = (now: number) => {
    rt.fenced = true;
    const silent = formatDuration(Math.round(now - last));
    const reason = `${FENCED_PREFIX}node ${node} could not renew its lease for ${silent}`;
    rt.log(`cronvisor: ${reason}; it starts no run and stops its runs`);
    for (const a of rt.active.values())
      terminate(rt, a, reason, fenceGraceMs(a.job.killGraceMs, leaseMs));
  };
  // The live nodes, read at once and after each renewal: the jobs are dealt again when the list
  // changes (spread.ts), and (once started: `rearm`) the timer armed for the new delays. A
  // failed read keeps the last list.
  const spread = rt.spread;
  const readNodes = async (rearm: boolean) => {
    if (spread === null) return;
    try {
      if (spread.setNodes(await rt.store.nodes()) && rearm && !rt.fenced) resumed();
    } catch {
      // The renewal reports a store that does not answer.
    }
  };
  void readNodes(false);
  const renew = async () => {
    if (renewing || rt.stopping) return;
    renewing = true;
    const from = performance.now();
    try {
      if (await rt.store.heartbeat(process.pid, rt.now(), rt.config.heartbeatMs, rt.logs.bytes)) {
        // Renewed after the lease had run out (the node was frozen, or its timers late): other
        // nodes may have taken its jobs over meanwhile, so its runs stop all the same.
        if (!rt.fenced && mustFence(last, from, leaseMs)) fence(from);
        last = from;
        await readNodes(true);
        if (rt.fenced) {
          rt.fenced = false;
          rt.log(`cronvisor: node ${node} renewed its lease again; it runs jobs again`);
          resumed();
        }
      } else if (!rt.fenced) {
        rt.log(`cronvisor: node ${node}'s row was taken by another daemon of the same name`);
      }
    } catch (e) {
      if (!rt.fenced) rt.log(`cronvisor: lease renewal failed: ${(e as Error).message}`);
    } finally {
      renewing = false;
    }
  };
  const check = () => {
    const now = performance.now();
    if (!rt.fenced && !rt.stopping && mustFence(last, now, leaseMs)) fence(now);
  };
  const timers = [
    setInterval(() => void renew(), renewEveryMs(rt.config.heartbeatMs, leaseMs)),
    setInterval(check, Math.max(50, Math.floor(leaseMs / 20))),
  ];
  return {
    stop: () => {
      for (const t of timers) clearInterval(t);
    },
  };
}

// The marker broker's answers: what one authenticated request does to the store (broker-store.ts,
// on the broker's store thread), as a reply. Never throws: a store error is a refusal.
import { EXIT } from "../core/exit.js";
import { isAlive, processGroupOf, startTimeOf } from "../core/proc.js";
import type { MarkerStore, MarkerWriter } from "../store/store.js";
import { refusal, type Reply, type Request } from "./broker-protocol.js";
import { isBusy } from "./target.js";

/** What the broker knows of one registered run. */
export interface Registered {
  job: string;
  runId: number;
  fence: number;
  /** The run's process group (== its main pid), set right after the spawn. */
  pgid: number | null;
  /**
   * The uid its processes run as: the run is served only on that uid's socket, which only that
   * uid (and root) can connect to, so its connections count against that uid.
   */
  uid: number;
}

/** The reply to one authenticated request; never throws. */
export async function answer(
  store: MarkerStore,
  { req, reg }: { req: Request; reg: Registered },
): Promise<Reply> {
  try {
    return await act(store, req, reg);
  } catch (e) {
    const msg = (e as Error).message ?? String(e);
    if (isBusy(e)) return refusal(EXIT.busy, `the state store stayed busy: ${msg}`);
    return refusal(req.op === "check" ? EXIT.unavailable : EXIT.fail, msg);
  }
}

async function act(store: MarkerStore, req: Request, reg: Registered): Promise<Reply> {
  const w: MarkerWriter = { job: reg.job, run: { id: reg.runId, fence: reg.fence } };
  const now = Date.now();
  const stale = refusal(
    EXIT.unknown,
    `refused: run ${reg.runId} (fence ${reg.fence}) is no longer the current run of job ${reg.job}; nothing was written`,
  );
  switch (req.op) {
    case "mark": {
      const n = await store.markDone(w, req.keys, now);
      return n === null ? stale : { ok: true, n };
    }
    case "check":
      return { ok: true, done: await store.isDone(w, req.key) };
    case "progress":
      return (await store.reportProgress(w, req.message, now)) ? { ok: true } : stale;
    default:
      return claimOp(store, req, reg, w, now, stale);
  }
}

/** `once`: the processes it names must be of the run's own group. */
async function claimOp(
  store: MarkerStore,
  req: Request & { op: "claim" | "complete" | "release" | "command" },
  reg: Registered,
  w: MarkerWriter,
  now: number,
  stale: Reply,
): Promise<Reply> {
  const foreign = [req.pid, ...(req.op === "command" ? [req.cmd_pid] : [])].find(
    (p) => reg.pgid === null || processGroupOf(p) !== reg.pgid,
  );
  if (foreign !== undefined)
    return refusal(
      EXIT.unknown,
      `refused: pid ${foreign} is not a process of run ${reg.runId} of job ${reg.job}`,
    );
  switch (req.op) {
    case "claim": {
      const me = { pid: req.pid, start: startTimeOf(req.pid) };
      return { ok: true, claim: await store.takeClaim(w, req.key, me, now, isAlive) };
    }
    case "command":
      await store.setClaimCommand(reg.job, req.key, req.pid, req.cmd_pid, startTimeOf(req.cmd_pid));
      return { ok: true };
    case "complete":
      return (await store.completeClaim(w, req.key, req.pid, now)) ? { ok: true } : stale;
    case "release":
      await store.releaseClaim(reg.job, req.key, req.pid);
      return { ok: true };
  }
}

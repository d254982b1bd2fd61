// Jobs entering the daemon's watch: at start-up (with the catch-up of slots that passed while no
// daemon ran) and on reload. Each returns the runs to offer (through the overlap decision) in
// the caller's batch, and does the store I/O its plan needs.
import { bootId } from "../core/proc.js";
import { nextSlotAt } from "../schedule/schedule.js";
import type { Config } from "../core/types.js";
import { planCatchUp } from "./catchup.js";
import type { Runtime } from "./runtime.js";
import { jobState, type JobState, type Pending } from "./state.js";
import { addJobs, recordMissed, type MissedWrite } from "./writes.js";

export interface Offer {
  name: string;
  p: Pending;
}

/**
 * Set rt.jobs to the config's jobs, in its order: a job kept from `prev` keeps what waits for it
 * and plans from its slot stamp; a new one gets its row and stamp (in one transaction for all,
 * not two autocommits each: 20,000 fsyncs at 10,000 jobs made start-up take seconds).
 * Returns the @reboot runs claimed for this boot.
 */
export async function watchJobs(
  rt: Runtime,
  config: Config,
  now: number,
  prev: Map<string, JobState>,
): Promise<Offer[]> {
  const fresh = config.jobs.filter((j) => !prev.has(j.name));
  const added = new Map((await addJobs(rt.store, fresh, now, bootId)).map((a) => [a.name, a]));
  const offers: Offer[] = [];
  rt.jobs.clear();
  for (const job of config.jobs) {
    const kept = prev.get(job.name);
    const a = added.get(job.name);
    if (kept) {
      const scannedTo = (await rt.store.job(job.name))?.scanned_to ?? null;
      rt.jobs.set(job.name, jobState(job, scannedTo, now, kept));
    } else if (a) {
      rt.jobs.set(job.name, jobState(job, a.scannedTo, now));
      if (a.reboot)
        offers.push({
          name: job.name,
          p: { slot: null, claimSlot: false, trigger: "reboot", attempt: 1 },
        });
    }
  }
  for (const [name, st] of prev) {
    if (!rt.jobs.has(name) && st.retryTimer) clearTimeout(st.retryTimer);
  }
  return offers;
}

/**
 * Slots that passed while no daemon ran get a disposition: the ones `catchup` runs are returned
 * (trigger `catchup`), the rest are recorded `missed` (the latest MISSED_ROWS one by one, older
 * ones counted in one event so a long downtime cannot write millions of rows), in one
 * transaction for every job.
 */
export async function catchUp(rt: Runtime, now: number): Promise<Offer[]> {
  const writes: MissedWrite[] = [];
  const offers: Offer[] = [];
  for (const st of rt.jobs.values()) {
    const name = st.cfg.name;
    const scannedTo = (await rt.store.job(name))?.scanned_to ?? null;
    const plan = planCatchUp(st.cfg, scannedTo, now);
    if (plan.kind === "future") {
      const detail = `last slot stamp ${new Date(plan.stamp).toISOString()} is in the future; continuing from now`;
      writes.push({
        job: name,
        slots: [],
        reason: "",
        event: { kind: "clock", detail },
        scannedTo: now,
      });
      rt.log(
        `cronvisor: warning: job ${name} has a slot stamp in the future (clock was wrong?); continuing from now`,
      );
      st.next = nextSlotAt(st.cfg, now);
    } else if (plan.kind === "passed" && scannedTo !== null) {
      // Nodes sharing the store all plan it: only the one that moves the stamp first catches up.
      if (!(await rt.store.claimCatchUp(name, scannedTo, now))) continue;
      const earlier =
        plan.earlier > 0
          ? `${plan.earlierCapped ? "more than " : ""}${plan.earlier} earlier slot(s) missed while the daemon was down (not listed one by one)`
          : null;
      writes.push({
        job: name,
        slots: plan.missed,
        reason: "daemon down",
        ...(earlier === null ? {} : { event: { kind: "missed", detail: earlier } }),
      });
      for (const slot of plan.run)
        offers.push({ name, p: { slot, claimSlot: true, trigger: "catchup", attempt: 1 } });
    }
  }
  await recordMissed(rt.store, writes, now);
  return offers;
}

// The CPU priority a run starts at: JOB_NICE_OFFSET lower than the process that starts it (the
// daemon, or `cronvisor run`); the spawner's child sets it before its exec, so the run and all it
// forks start there. On 2 cores, a few busy jobs (four shells looping on `mark`) made
// the daemon fire its next slots 2.5x later than on an idle machine; with its jobs at a higher
// nice, the scheduler wins the CPU whenever it wakes up, and the jobs share the rest as before.

/** A run's nice is its starter's + this: nice 0 under the shipped unit's Nice=-5, as under cron. */
export const JOB_NICE_OFFSET = 5;

/** The nice a run starts at, given its starter's (pure): at most 19, the kernel's lowest. */
export function jobNice(own: number): number {
  return Math.min(19, own + JOB_NICE_OFFSET);
}

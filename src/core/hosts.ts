// Where a job may run: its `hosts:` (node names), or anywhere. In core because the daemon (which
// jobs a node watches), `run` (refused elsewhere) and status (is some running node allowed?)
// all ask it.
import type { JobConfig } from "./types.js";

/** May the job run on node `node`? (No `hosts:`: on any node.) */
export function runsOn(job: Pick<JobConfig, "hosts">, node: string): boolean {
  return job.hosts === null || job.hosts.includes(node);
}

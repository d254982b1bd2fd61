// What a node runs of a config: the jobs whose `hosts:` allow it, and the hash of each job's
// definition that it records, so that status can tell two nodes defining a job differently, and
// the record of the config it runs. Pure.
import { createHash } from "node:crypto";
import { runsOn } from "../core/hosts.js";
import { packConfig } from "../core/config-record.js";
import type { Config } from "../core/types.js";
import type { AcceptedConfig } from "../store/store.js";

/** The config as node `node` runs it: only the jobs that may run there. */
export function forNode(config: Config, node: string): Config {
  const jobs = config.jobs.filter((j) => runsOn(j, node));
  return jobs.length === config.jobs.length ? config : { ...config, jobs };
}

/** The hash of each job's definition: every setting but where in the file it was written. */
export function jobHashes(config: Config): Map<string, string> {
  return new Map(
    config.jobs.map((j) => {
      const { line: _line, ...definition } = j;
      const hash = createHash("sha256").update(JSON.stringify(definition)).digest("hex");
      return [j.name, hash.slice(0, 16)];
    }),
  );
}

/**
 * The record of a config the daemon runs, for commands whose config file is broken: a Config as
 * the state dir's config cache keeps it, packed (core/config-record.ts), read back by
 * commands/running-config.ts.
 */
export function accepted(
  config: Config,
  hash: string | null | undefined,
  at: number,
): AcceptedConfig {
  return { json: packConfig(config), hash: hash ?? null, at };
}

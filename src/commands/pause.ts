// `cronvisor pause` and `cronvisor resume`: a flag in the store, so it survives daemon restarts.
import { findJob, load, openStore, out } from "./shared.js";

export const pause = (name: string, o: { config?: string }): Promise<void> =>
  setPaused(name, o, true);

export const resume = (name: string, o: { config?: string }): Promise<void> =>
  setPaused(name, o, false);

async function setPaused(name: string, o: { config?: string }, paused: boolean): Promise<void> {
  const config = await load(o.config);
  const job = findJob(config, name);
  const store = await openStore(config, true);
  await store.setPaused(name, paused, Date.now());
  await store.close();
  if (!paused && job.paused)
    out(`note: ${name} has paused: true in ${config.file}; it stays paused until that is removed`);
  out(`${name} ${paused ? "paused" : "resumed"}`);
}

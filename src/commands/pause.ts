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
  // A job its config pauses is not resumed by clearing the store's flag: never say it is.
  if (!paused && job.paused)
    out(
      `${name} stays paused: its entry in ${config.file} (line ${job.line}) says paused: true; remove that, then \`cronvisor reload -c ${config.file}\` (the pause set by \`cronvisor pause\` is lifted)`,
    );
  else out(`${name} ${paused ? "paused" : "resumed"}`);
}

// `cronvisor markers` (list a job's done-markers) and `cronvisor unmark` (an operator removes one).
import { EXIT } from "../core/exit.js";
import { printable } from "../core/printable.js";
import { loadForReading } from "./running-config.js";
import { CliError, findJob, load, openStore, openStoreOrEmpty, out, when } from "./shared.js";
import { renderTable } from "../core/table.js";

export async function markers(name: string, o: { config?: string; json?: boolean }): Promise<void> {
  const { config } = await loadForReading(o.config);
  findJob(config, name);
  const store = await openStoreOrEmpty(config);
  const list = ((await store?.markers(name)) ?? []).map((m) => ({
    key: m.key,
    run_id: m.run_id,
    fence: m.fence,
    created_at: new Date(m.created_at).toISOString(),
  }));
  await store?.close();
  if (o.json) return out(JSON.stringify(list, null, 2));
  out(
    list.length === 0
      ? printable(`no markers for ${name}`)
      : renderTable([
          ["KEY", "RUN", "MARKED AT"],
          ...list.map((m) => [m.key, String(m.run_id ?? "-"), when(m.created_at)]),
        ]).join("\n"),
  );
}

export async function unmark(name: string, key: string, o: { config?: string }): Promise<void> {
  const { checkKey, UsageError } = await import("../markers/markers.js");
  try {
    checkKey(key); // the rule `mark` keys follow: an empty key was never marked, and is a typo
  } catch (e) {
    if (e instanceof UsageError) throw new CliError(`cronvisor: ${e.message}`, EXIT.usage);
    throw e;
  }
  const config = await load(o.config);
  findJob(config, name);
  const store = await openStore(config, true);
  const removed = await store.removeMarker(
    name,
    key,
    Date.now(),
    `${process.env.USER ?? "operator"} pid ${process.pid}`,
  );
  await store.close();
  out(printable(removed ? `unmarked ${key} in ${name}` : `${key} was not marked in ${name}`));
}

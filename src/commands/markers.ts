// `cronvisor markers` (list a job's done-markers) and `cronvisor unmark` (an operator removes one).
import { EXIT } from "../core/exit.js";
import { printable } from "../core/printable.js";
import { loadForReading } from "./running-config.js";
import { CliError, findJob, load, openStore, openStoreOrEmpty, out, when } from "./shared.js";
import { renderTable } from "../core/table.js";

export async function markers(
  name: string,
  o: { config?: string; json?: boolean; moveTo?: string },
): Promise<void> {
  if (o.moveTo !== undefined) return moveMarkers(name, o.moveTo, o);
  const { config } = await loadForReading(o.config);
  const store = await openStoreOrEmpty(config);
  const rows = (await store?.markers(name)) ?? [];
  await store?.close();
  // A namespace no job owns any more (a renamed or removed job's) is listed while it has markers.
  if (rows.length === 0) findJob(config, name);
  const list = rows.map((m) => ({
    key: m.key,
    run_id: m.run_id,
    fence: m.fence,
    created_at: new Date(m.created_at).toISOString(),
  }));
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

/**
 * `markers OLD --move-to NEW`: a renamed job's markers carried over to its new name, so that its
 * done work stays done. NEW must be a job of the config (a typo would strand them again); OLD may
 * be any namespace with markers. Refused (75) while either job runs: its run could write into
 * OLD after the move, or find NEW half-filled.
 */
async function moveMarkers(from: string, to: string, o: { config?: string }): Promise<void> {
  const config = await load(o.config);
  findJob(config, to);
  if (from === to) throw new CliError(`cronvisor: --move-to names ${to} itself`, EXIT.usage);
  const store = await openStore(config);
  try {
    const owned = config.jobs.some((j) => j.name === from);
    if ((await store.markerCount(from)) === 0) {
      if (!owned) findJob(config, from); // neither a job nor markers: the usual error
      return out(printable(`no markers for ${from}: nothing moved`));
    }
    const { runAlive } = await import("../core/proc.js");
    const by = `${process.env.USER ?? "operator"} pid ${process.pid}`;
    const r = await store.moveMarkers({ from, to, now: Date.now(), by, holderAlive: runAlive });
    if (r.kind === "running")
      throw new CliError(
        printable(
          `cronvisor: ${r.job} is running (run ${r.run.id}): nothing moved; try again once it has ended`,
        ),
        EXIT.busy,
      );
    const already = r.already > 0 ? ` (${r.already} already marked in ${to}: dropped)` : "";
    out(printable(`moved ${r.moved} marker(s) from ${from} to ${to}${already}`));
  } finally {
    await store.close();
  }
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

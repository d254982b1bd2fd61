// Named locks and concurrency groups in the config (docs/locks.md): a job's `locks:` list, the
// top-level `groups:` map, and the cross-check that every job's `group:` names one of them.
import { isMap, isScalar, type YAMLMap, type YAMLSeq } from "yaml";
import { BAD, deref, describe, report, sourceText, type Ctx, type Raw } from "./nodes.js";
import { isLockName } from "./scalars.js";
import { suggest } from "./suggest.js";

/** `locks:`: a list of lock names, each once. */
export function readLockNames(ctx: Ctx, node: YAMLSeq, where: string): string[] | typeof BAD {
  const names: string[] = [];
  for (const [i, item] of node.items.entries()) {
    const at = `${where}[${i}]`;
    const value = deref(ctx, item, at, "value");
    if (value === BAD) continue;
    if (!isScalar(value) || typeof value.value !== "string" || !isLockName(value.value)) {
      report(
        ctx,
        value,
        at,
        `expected a lock name (1-64 of a-z 0-9 _ . -, starting with a letter or digit), got ${describe(ctx, value)}`,
      );
    } else if (names.includes(value.value)) {
      report(ctx, value, at, `${JSON.stringify(value.value)} is listed twice`);
    } else names.push(value.value);
  }
  return names.length === node.items.length ? names : BAD;
}

/**
 * Every `group:` (a job's, or the defaults') names a group of the top-level `groups:`; reported
 * at the value, with the nearest known name.
 */
export function reportUnknownGroups(ctx: Ctx, root: YAMLMap, raw: Raw): void {
  // A groups: map with errors of its own is reported already: no guess at what it holds.
  if (root.has("groups") && !("groups" in raw)) return;
  const groups = raw.groups !== null && typeof raw.groups === "object" ? raw.groups : {};
  const known = Object.keys(groups as Raw);
  const check = (owner: unknown, where: string) => {
    if (!isMap(owner)) return;
    const pair = owner.items.find((p) => isScalar(p.key) && p.key.value === "group");
    const v = pair?.value;
    if (!isScalar(v) || typeof v.value !== "string" || known.includes(v.value)) return;
    const hint = known.length === 0 ? " (there is no top-level groups:)" : suggest(v.value, known);
    report(ctx, v, `${where}.group`, `unknown group ${JSON.stringify(v.value)}${hint}`);
  };
  check(root.get("defaults", true), "defaults");
  const jobs = root.get("jobs", true);
  if (!isMap(jobs)) return;
  for (const pair of jobs.items) {
    if (isScalar(pair.key)) check(pair.value, `jobs.${sourceText(ctx, pair.key)}`);
  }
}

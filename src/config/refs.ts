// The lists and maps of names a config links by (docs/chains-and-maintenance.md): a job's `then:`
// and `then_on_failure:` (job names), its `blackouts:` (window names or windows) and the top-level
// `blackouts:` map. links.ts checks, after the walk, that what they name exists.
import { isScalar, type Scalar, type YAMLMap, type YAMLSeq } from "yaml";
import { JOB_NAME_PATTERN } from "./keys.js";
import type { BlackoutRef, JobRef } from "./links.js";
import {
  BAD,
  deref,
  describe,
  join,
  rangeOf,
  report,
  sourceText,
  type Ctx,
  type Raw,
} from "./nodes.js";
import { parseWindow } from "../schedule/windows.js";

/** A string item of a list, or null (reported). */
function stringItem(ctx: Ctx, item: unknown, at: string, what: string): Scalar | null {
  const value = deref(ctx, item, at, "value");
  if (value === BAD) return null;
  if (!isScalar(value) || typeof value.value !== "string" || value.value.trim() === "") {
    report(ctx, value, at, `expected ${what}, got ${describe(ctx, value)}`);
    return null;
  }
  return value;
}

/** `then:` / `then_on_failure:`: job names, each once (that they exist is checked in links.ts). */
export function readJobRefs(ctx: Ctx, node: YAMLSeq, where: string): JobRef[] {
  const refs: JobRef[] = [];
  const nameRe = new RegExp(JOB_NAME_PATTERN);
  for (const [i, item] of node.items.entries()) {
    const at = `${where}[${i}]`;
    const value = stringItem(ctx, item, at, "a job name");
    if (value === null) continue;
    const name = String(value.value);
    if (!nameRe.test(name)) report(ctx, value, at, `${JSON.stringify(name)} is not a job name`);
    else if (refs.some((r) => r.name === name))
      report(ctx, value, at, `${JSON.stringify(name)} is listed twice`);
    else refs.push({ name, at: rangeOf(value)[0], path: at });
  }
  // Partial when an item was bad (reported: the config is refused), so links.ts still checks the rest.
  return refs;
}

/** A text with ":" or ".." is a window of its own; any other, the name of a top-level one. */
const isWindowText = (s: string): boolean => s.includes(":") || s.includes("..");

/** A job's `blackouts:`: names of top-level windows (checked in links.ts) or windows. */
export function readBlackoutList(ctx: Ctx, node: YAMLSeq, where: string): BlackoutRef[] {
  const refs: BlackoutRef[] = [];
  for (const [i, item] of node.items.entries()) {
    const at = `${where}[${i}]`;
    const value = stringItem(ctx, item, at, "a blackout name or window");
    if (value === null) continue;
    const text = String(value.value).trim();
    if (!isWindowText(text)) {
      refs.push({ name: text, window: null, at: rangeOf(value)[0], path: at });
      continue;
    }
    const w = parseWindow(text);
    if ("error" in w) report(ctx, value, at, `bad window: ${w.error}`);
    else refs.push({ name: text, window: w, at: rangeOf(value)[0], path: at });
  }
  return refs; // partial when an item was bad (reported), as readJobRefs
}

/** The top-level `blackouts:`: NAME: window. */
export function readWindowMap(ctx: Ctx, node: YAMLMap, where: string): Raw {
  const out: Raw = {};
  const nameRe = new RegExp(JOB_NAME_PATTERN);
  for (const pair of node.items) {
    if (!isScalar(pair.key)) {
      report(ctx, pair.key, where, "window names must be plain names");
      continue;
    }
    const name = sourceText(ctx, pair.key);
    const at = join(where, name);
    if (!nameRe.test(name)) {
      report(
        ctx,
        pair.key,
        where,
        `bad window name ${JSON.stringify(name)}: use 1-64 of a-z 0-9 _ . - starting with a letter or digit`,
      );
      continue;
    }
    const value = stringItem(ctx, pair.value ?? pair.key, at, "a window");
    if (value === null) {
      continue;
    }
    const w = parseWindow(String(value.value));
    if ("error" in w) {
      report(ctx, value, at, `bad window: ${w.error}`);
    } else out[name] = w;
  }
  return out; // partial when an entry was bad (reported), so job lists naming the good ones check
}

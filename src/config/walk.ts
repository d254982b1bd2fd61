// The YAML walk: a map's keys checked against the key table, recursively, into Raw values (see
// nodes.ts). Every problem is reported with its position and key path; the walk goes on after
// one, so that a run of `validate` lists them all.
import {
  isMap,
  isNode,
  isScalar,
  isSeq,
  type Node as YamlNode,
  type Scalar,
  type YAMLMap,
  type YAMLSeq,
} from "yaml";
import type { AlertTarget } from "../core/types.js";
import { ENV_NAME, isReservedEnvName } from "../core/env-name.js";
import { JOB_KEYS, JOB_NAME_PATTERN, type KeySpec } from "./keys.js";
import {
  BAD,
  deref,
  describe,
  isEmptyValue,
  join,
  nearYamlError,
  rangeOf,
  report,
  sourceText,
  type Ctx,
  type Raw,
  type RawJob,
} from "./nodes.js";
import { readLockNames } from "./groups.js";
import { expected, isLockName, isNodeName, readScalar, type Fail } from "./scalars.js";
import { readBlackoutList, readJobRefs, readWindowMap } from "./refs.js";
import { jobUnknownKey, nearest, unknownKeyMessage } from "./suggest.js";

type UnknownKeyMessage = (key: string, value: unknown) => string;

/** The keys of `node` that `table` knows, read; the others reported with `unknownKey`. */
export function readMap(
  ctx: Ctx,
  node: unknown,
  table: Readonly<Record<string, KeySpec>>,
  where: string,
  unknownKey: UnknownKeyMessage = (key) => unknownKeyMessage(key, Object.keys(table)),
): Raw | typeof BAD {
  if (!isMap(node)) return BAD;
  const out: Raw = {};
  const seen = new Set<string>();
  for (const pair of node.items) {
    if (!isScalar(pair.key)) {
      report(ctx, pair.key, where, "keys must be plain names");
      continue;
    }
    const key = sourceText(ctx, pair.key);
    if (seen.has(key)) continue; // YAML reports the duplicate itself
    seen.add(key);
    const spec = Object.hasOwn(table, key) ? table[key] : undefined;
    if (!spec) {
      report(ctx, pair.key, where, unknownKey(key, pair.value));
      continue;
    }
    const value = readValue(ctx, spec, pair.value, pair.key, join(where, key));
    if (value !== BAD) out[key] = value;
  }
  return out;
}

function readValue(ctx: Ctx, spec: KeySpec, value: unknown, key: Scalar, where: string): unknown {
  const node = deref(ctx, value, where, spec.kind === "schedule" ? "schedule" : "value");
  if (node === BAD) return BAD;
  // An empty value has no place of its own in the text: point at its key.
  const at = isEmptyValue(node) ? key : node;
  const fail: Fail = (message) => {
    report(ctx, at, where, message);
    return BAD;
  };
  const wrongType = (): typeof BAD =>
    fail(`expected ${expected(spec)}, got ${describe(ctx, node)}`);
  if (!isNode(node) || (isScalar(node) && node.value === null)) {
    return spec.nullable ? null : readEmpty(spec, fail, wrongType);
  }

  switch (spec.kind) {
    case "section":
    case "defaults":
      if (!isMap(node)) return wrongType();
      return readMap(ctx, node, spec.keys ?? {}, where, (k) =>
        spec.kind === "defaults" && Object.hasOwn(JOB_KEYS, k)
          ? `"${k}" cannot have a default: set it on each job`
          : unknownKeyMessage(k, Object.keys(spec.keys ?? {})),
      );
    case "jobs":
      return isMap(node) ? readJobs(ctx, node, where) : wrongType();
    case "env":
      return isMap(node) ? readEnv(ctx, node, where) : wrongType();
    case "alerts":
      return isSeq(node) ? readAlerts(ctx, node, spec, where) : wrongType();
    case "command":
      return readCommand(ctx, node, where, wrongType);
    case "nodes":
      return isSeq(node) ? readNodeNames(ctx, node, where) : wrongType();
    case "names":
      return isSeq(node) ? readLockNames(ctx, node, where) : wrongType();
    case "groups":
      return isMap(node) ? readGroups(ctx, node, spec, where) : wrongType();
    case "jobrefs":
      return isSeq(node) ? readJobRefs(ctx, node, where) : wrongType();
    case "blackouts":
      return isSeq(node) ? readBlackoutList(ctx, node, where) : wrongType();
    case "windows":
      return isMap(node) ? readWindowMap(ctx, node, where) : wrongType();
  }
  return isScalar(node) ? readScalar(ctx, spec, node, fail, wrongType) : wrongType();
}

/** A key written with no value (or null) that may not be switched off. */
function readEmpty(spec: KeySpec, fail: Fail, wrongType: () => typeof BAD): unknown {
  switch (spec.kind) {
    case "env":
    case "section":
    case "defaults":
      return {}; // an empty block, e.g. every entry commented out
    case "alerts":
    case "names":
    case "jobrefs":
    case "blackouts":
      return [];
    case "groups":
    case "windows":
      return {};
    case "jobs":
      return fail("no jobs defined");
    case "command":
      return fail("command is empty");
    case "nodes":
      return fail("no node named: leave hosts out to run the job on any node");
    default:
      return wrongType();
  }
}

function readJobs(ctx: Ctx, node: YAMLMap, where: string): RawJob[] {
  const jobs: RawJob[] = [];
  const seen = new Set<string>();
  const nameRe = new RegExp(JOB_NAME_PATTERN);
  for (const pair of node.items) {
    if (!isScalar(pair.key)) {
      report(ctx, pair.key, where, "job names must be plain names");
      continue;
    }
    const name = sourceText(ctx, pair.key);
    if (seen.has(name)) continue; // YAML reports the duplicate
    seen.add(name);
    if (!nameRe.test(name)) {
      report(
        ctx,
        pair.key,
        where,
        `bad job name ${JSON.stringify(name)}: use 1-64 of a-z 0-9 _ . - starting with a letter or digit`,
      );
    }
    const jobPath = `${where}.${name}`;
    const value = deref(ctx, pair.value, jobPath, "value");
    if (value === BAD) continue;
    if (!isMap(value)) {
      const at = isEmptyValue(value) ? pair.key : value;
      report(
        ctx,
        at,
        jobPath,
        `expected a map with "schedule" and "command", got ${describe(ctx, value)}`,
      );
      continue;
    }
    const raw = readMap(ctx, value, JOB_KEYS, jobPath, (key) => jobUnknownKey(key));
    reportMissingKeys(ctx, value, pair.key, jobPath);
    if (raw !== BAD) {
      jobs.push({ name, line: ctx.lineCounter.linePos(rangeOf(pair.key)[0]).line, raw });
    }
  }
  return jobs;
}

/** `missing "schedule"` at the job's name, for each required key the job lacks. */
function reportMissingKeys(ctx: Ctx, job: YAMLMap, name: unknown, jobPath: string): void {
  // A key YAML could not read, or a misspelt one (already reported), is not also "missing".
  const broken = nearYamlError(ctx, job);
  const given = job.items.map((p) => (isScalar(p.key) ? sourceText(ctx, p.key) : ""));
  for (const [key, spec] of Object.entries(JOB_KEYS)) {
    const misspelt = given.some((k) => !Object.hasOwn(JOB_KEYS, k) && nearest(k, [key]));
    if (spec.required && !job.has(key) && !broken && !misspelt) {
      report(ctx, name, jobPath, `missing "${key}"`);
    }
  }
}

function readEnv(ctx: Ctx, node: YAMLMap, where: string): Raw | typeof BAD {
  const env: Record<string, string> = {};
  const seen = new Set<string>();
  let ok = true;
  for (const pair of node.items) {
    if (!isScalar(pair.key)) {
      report(ctx, pair.key, where, "variable names must be plain names");
      ok = false;
      continue;
    }
    const name = sourceText(ctx, pair.key);
    if (seen.has(name)) continue;
    seen.add(name);
    if (!ENV_NAME.test(name)) {
      report(
        ctx,
        pair.key,
        where,
        `bad variable name ${JSON.stringify(name)}: use letters, digits and _, not starting with a digit`,
      );
      ok = false;
    } else if (isReservedEnvName(name)) {
      report(ctx, pair.key, where, `"${name}" is reserved: cronvisor sets CRONVISOR_* itself`);
      ok = false;
    }
    const value = readArgument(ctx, pair.value, pair.key, `${where}.${name}`);
    if (value === BAD) ok = false;
    else env[name] = value;
  }
  return ok ? env : BAD;
}

/** A scalar that becomes a string: an env value or an argv entry. Numbers stay as written. */
function readArgument(ctx: Ctx, value: unknown, key: unknown, where: string): string | typeof BAD {
  const node = deref(ctx, value, where, "value");
  if (node === BAD) return BAD;
  if (isScalar(node) && node.value !== null) return sourceText(ctx, node);
  const at = isEmptyValue(node) ? key : node;
  const hint = isScalar(node) || !isNode(node) ? ' (write "" for an empty string)' : "";
  report(ctx, at, where, `expected a string, got ${describe(ctx, node)}${hint}`);
  return BAD;
}

function readCommand(
  ctx: Ctx,
  node: YamlNode,
  where: string,
  wrongType: () => typeof BAD,
): string | string[] | typeof BAD {
  if (isScalar(node) && typeof node.value !== "string") return wrongType();
  if (!isScalar(node) && !isSeq(node)) return wrongType();
  const empty = isScalar(node) ? String(node.value).trim() === "" : node.items.length === 0;
  if (empty) {
    report(ctx, node, where, "command is empty");
    return BAD;
  }
  if (isScalar(node)) return String(node.value);
  const argv: string[] = [];
  for (const [i, item] of node.items.entries()) {
    const arg = readArgument(ctx, item, item, `${where}[${i}]`);
    if (arg !== BAD && i === 0 && arg.trim() === "") {
      report(ctx, item, `${where}[0]`, "the program name is empty");
    } else if (arg !== BAD) argv.push(arg);
  }
  return argv.length === node.items.length ? argv : BAD;
}

/** `hosts:`: a list of node names, each once. */
function readNodeNames(ctx: Ctx, node: YAMLSeq, where: string): string[] | typeof BAD {
  if (node.items.length === 0) {
    report(
      ctx,
      node,
      where,
      "an empty list names no node: leave hosts out to run the job on any node",
    );
    return BAD;
  }
  const names: string[] = [];
  for (const [i, item] of node.items.entries()) {
    const at = `${where}[${i}]`;
    const value = deref(ctx, item, at, "value");
    if (value === BAD) continue;
    if (!isScalar(value) || typeof value.value !== "string" || !isNodeName(value.value)) {
      report(ctx, value, at, `expected a node name, got ${describe(ctx, value)}`);
    } else if (names.includes(value.value)) {
      report(ctx, value, at, `${JSON.stringify(value.value)} is listed twice`);
    } else names.push(value.value);
  }
  return names.length === node.items.length ? names : BAD;
}

function readAlerts(
  ctx: Ctx,
  node: YAMLSeq,
  spec: KeySpec,
  where: string,
): AlertTarget[] | typeof BAD {
  const alerts: AlertTarget[] = [];
  for (const [i, item] of node.items.entries()) {
    const itemPath = `${where}[${i}]`;
    const value = deref(ctx, item, itemPath, "value");
    if (value === BAD) continue;
    const raw = readMap(ctx, value, spec.keys ?? {}, itemPath);
    const given = isMap(value) ? Object.keys(spec.keys ?? {}).filter((k) => value.has(k)) : [];
    if (raw === BAD || (isMap(value) && value.items.length === 0)) {
      const got = isMap(value) ? "an empty map" : describe(ctx, value);
      report(ctx, value, itemPath, `expected {webhook: URL} or {command: STRING}, got ${got}`);
    } else if (given.length === 0) {
      continue; // only unknown keys, each reported by readMap
    } else if (given.length > 1) {
      report(ctx, value, itemPath, 'an alert has either "webhook" or "command", not both');
    } else if (typeof raw.webhook === "string") {
      alerts.push({ kind: "webhook", url: raw.webhook });
    } else if (typeof raw.command === "string") {
      alerts.push({ kind: "command", command: raw.command });
    } // else its one value was wrong, and readMap said so
  }
  return alerts.length === node.items.length ? alerts : BAD;
}

/** `groups:`: each group's name and its settings (max_running required). */
export function readGroups(
  ctx: Ctx,
  node: YAMLMap,
  spec: KeySpec,
  where: string,
): Record<string, Raw> | typeof BAD {
  const out: Record<string, Raw> = {};
  let ok = true;
  for (const pair of node.items) {
    const name = isScalar(pair.key) ? sourceText(ctx, pair.key) : "";
    if (!isScalar(pair.key) || !isLockName(name)) {
      report(
        ctx,
        pair.key,
        where,
        `bad group name ${JSON.stringify(name)}: use 1-64 of a-z 0-9 _ . - starting with a letter or digit`,
      );
      ok = false;
      continue;
    }
    const path = `${where}.${name}`;
    const value = deref(ctx, pair.value, path, "value");
    if (value === BAD) {
      ok = false;
      continue;
    }
    if (!isMap(value)) {
      report(
        ctx,
        value ?? pair.key,
        path,
        `expected { max_running: N }, got ${describe(ctx, value)}`,
      );
      ok = false;
      continue;
    }
    const raw = readMap(ctx, value, spec.keys ?? {}, path);
    if (raw === BAD) ok = false;
    else if (!("max_running" in raw)) {
      if (!value.has("max_running")) report(ctx, pair.key, path, 'missing "max_running"');
      ok = false;
    } else out[name] = raw;
  }
  return ok ? out : BAD;
}

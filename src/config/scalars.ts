// One scalar value checked against its key's kind: a duration, a size, a time zone, a URL, a
// HOST:PORT, a schedule... and the words for what each kind expects.
import type { Scalar } from "yaml";
import { parseDuration, parseSize } from "../core/duration.js";
import { isUtcZone } from "../schedule/host-zone.js";
import { parseSchedule } from "../schedule/syntax.js";
import {
  HOSTPORT_PATTERN,
  LOCK_NAME_PATTERN,
  NODE_NAME_PATTERN,
  PERCENT_PATTERN,
  STORE_URL_PATTERN,
  type KeySpec,
} from "./keys.js";
import { BAD, describe, sourceText, type Ctx } from "./nodes.js";
import { suggest } from "./suggest.js";

/** Report `message` at the value (or its key) and return BAD. */
export type Fail = (message: string) => typeof BAD;

/**
 * A scalar's value for a key of a scalar kind (durations in ms, sizes in bytes), or BAD once
 * reported. `wrongType` reports the usual "expected X, got Y".
 */
export function readScalar(
  ctx: Ctx,
  spec: KeySpec,
  node: Scalar,
  fail: Fail,
  wrongType: () => typeof BAD,
): unknown {
  const v = node.value;
  switch (spec.kind) {
    case "string":
    case "path":
      return typeof v === "string" && v.trim() !== "" ? v : wrongType();
    case "bool":
      return typeof v === "boolean" ? v : wrongType();
    case "count":
      return typeof v === "number" && Number.isInteger(v) && v >= (spec.min ?? 0) ? v : wrongType();
    case "enum": {
      const values = spec.values ?? [];
      if (typeof v === "string" && values.includes(v)) return v;
      return fail(
        `expected ${expected(spec)}, got ${describe(ctx, node)}${suggest(String(v), values)}`,
      );
    }
    case "duration":
    case "size":
      if (typeof v !== "string" && typeof v !== "number") return wrongType();
      return readAmount(spec, sourceText(ctx, node), fail);
    case "percent": {
      if (v === null && spec.nullable) return null;
      if (typeof v !== "string" || !new RegExp(PERCENT_PATTERN).test(v)) return wrongType();
      const n = Number(v.slice(0, -1));
      return n > 0 ? n : fail("must be more than 0%");
    }
    case "timezone":
      if (typeof v !== "string") return wrongType();
      if (isTimeZone(v)) return v;
      return fail(`unknown time zone ${JSON.stringify(v)}${suggest(v, timeZoneNames())}`);
    case "url":
      return typeof v === "string" && isHttpUrl(v) ? v : wrongType();
    case "hostport":
      return typeof v === "string" ? readHostPort(v, fail, wrongType) : wrongType();
    case "store":
      return typeof v === "string" ? readStoreUrl(v, fail, wrongType) : wrongType();
    case "node":
      return typeof v === "string" && isNodeName(v) ? v : wrongType();
    case "name":
      return typeof v === "string" && isLockName(v) ? v : wrongType();
    case "number":
      return typeof v === "number" && Number.isFinite(v) ? v : wrongType();
    case "schedule":
      if (typeof v !== "string") return wrongType();
      try {
        return { schedule: v, pattern: parseSchedule(v) };
      } catch (e) {
        return fail((e as Error).message);
      }
  }
  return wrongType();
}

/** A duration (ms) or size (bytes) as written; `none` switches a nullable one off. */
function readAmount(spec: KeySpec, text: string, fail: Fail): number | null | typeof BAD {
  if (spec.nullable && text === "none") return null;
  try {
    const n = spec.kind === "duration" ? parseDuration(text) : parseSize(text);
    return spec.positive && n === 0 ? fail("must be more than 0") : n;
  } catch (e) {
    return fail((e as Error).message);
  }
}

function isHttpUrl(text: string): boolean {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  return url !== undefined && (url.protocol === "http:" || url.protocol === "https:");
}

function readHostPort(
  text: string,
  fail: Fail,
  wrongType: () => typeof BAD,
): { host: string; port: number } | typeof BAD {
  const m = new RegExp(HOSTPORT_PATTERN).exec(text);
  if (!m) return wrongType();
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return fail(`port must be 1-65535, got ${port}`);
  return { host: (m[1] ?? "").replace(/^\[(.*)\]$/, "$1"), port };
}

/** A named lock's or a group's name (`locks:`, `group:`, `groups:`). */
export function isLockName(text: string): boolean {
  return new RegExp(LOCK_NAME_PATTERN).test(text);
}

/** A node's name, as `node:` and `hosts:` take it. */
export function isNodeName(text: string): boolean {
  return new RegExp(NODE_NAME_PATTERN).test(text);
}

/**
 * A PostgreSQL store's URL. A password in it is refused: the config is read by every command
 * and recorded in the store, and the password belongs in password_file, PGPASSWORD or ~/.pgpass.
 * The message never repeats the URL (it would print the password).
 */
function readStoreUrl(text: string, fail: Fail, wrongType: () => typeof BAD): string | typeof BAD {
  if (!new RegExp(STORE_URL_PATTERN).test(text)) return wrongType();
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return fail("not a valid URL; expected postgresql://USER@HOST:PORT/DB");
  }
  if (url.password !== "")
    return fail(
      "the URL holds a password: put it in password_file (0600), PGPASSWORD or ~/.pgpass, and write postgresql://USER@HOST:PORT/DB",
    );
  if (url.pathname.replace(/^\//, "") === "")
    return fail("no database named; expected postgresql://USER@HOST:PORT/DB");
  return text;
}

/** What a key of this kind takes, for "expected X, got Y". */
export function expected(spec: KeySpec): string {
  switch (spec.kind) {
    case "string":
    case "path":
      return "a non-empty string";
    case "duration":
      return "a duration, e.g. 30s";
    case "size":
      return "a size, e.g. 10MB";
    case "percent":
      return "a percentage of one CPU, e.g. 150%";
    case "count":
      return `a whole number (${spec.min ?? 0} or more)`;
    case "bool":
      return "true or false";
    case "enum":
      return `one of ${(spec.values ?? []).join(", ")}`;
    case "schedule":
      return 'a cron expression in quotes, e.g. "0 2 * * *"';
    case "command":
      return "a command string or a list of arguments";
    case "timezone":
      return "a time zone name, e.g. Europe/Berlin";
    case "env":
      return "a map of NAME: value";
    case "url":
      return "an http(s) URL";
    case "hostport":
      return "HOST:PORT, e.g. 127.0.0.1:9464";
    case "store":
      return "postgresql://USER@HOST:PORT/DB";
    case "node":
      return "a node name (1-64 of A-Z a-z 0-9 _ . -, starting with a letter or digit)";
    case "nodes":
      return "a list of node names, e.g. [app01, app02]";
    case "name":
      return "a name (1-64 of a-z 0-9 _ . -, starting with a letter or digit)";
    case "names":
      return "a list of lock names, e.g. [db]";
    case "number":
      return "a number, e.g. 10";
    case "groups":
      return "a map of groups by name, e.g. { heavy: { max_running: 2 } }";
    case "alerts":
      return "a list of {webhook: URL} or {command: STRING}";
    case "section":
      return `a map of ${Object.keys(spec.keys ?? {}).join(", ")}`;
    case "defaults":
      return "a map of job settings";
    case "jobs":
      return "a map of jobs by name";
    case "jobrefs":
      return "a list of job names, e.g. [report]";
    case "blackouts":
      return 'a list of blackout names or windows, e.g. [xmas, "Sat 00:00-06:00"]';
    case "windows":
      return 'a map of NAME: window, e.g. xmas: "2026-12-24..2026-12-26"';
  }
}

// Building a DateTimeFormat costs ~0.5 ms, and a config names few zones many times.
const knownZones = new Set<string>();

function isTimeZone(zone: string): boolean {
  // A name of UTC is known without Intl: a UTC config then never loads ICU (host-zone.ts).
  if (isUtcZone(zone) || knownZones.has(zone)) return true;
  try {
    new Intl.DateTimeFormat(undefined, { timeZone: zone });
  } catch {
    return false;
  }
  knownZones.add(zone);
  return true;
}

function timeZoneNames(): string[] {
  return ["UTC", ...Intl.supportedValuesOf("timeZone")];
}

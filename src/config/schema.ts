// The JSON Schema of jobs.yaml, built from the same key table the validator reads (keys.ts
// KEYS), so the two cannot drift. scripts/gen-schema.js writes it to schema/jobs.schema.json for
// editors; a test checks the committed file is current.
//
// The schema is a guide for editors, the validator is the authority: some checks (a cron
// expression that never fires, an unknown time zone, a zero timeout) have no schema form.

import { DURATION_PATTERN, SIZE_PATTERN } from "../core/duration.js";
import { RESERVED_ENV_PREFIX } from "../core/env-name.js";
import { MACROS } from "../schedule/syntax.js";
import {
  ENV_NAME_PATTERN,
  HOSTPORT_PATTERN,
  JOB_NAME_PATTERN,
  KEYS,
  LOCK_NAME_PATTERN,
  NODE_NAME_PATTERN,
  PERCENT_PATTERN,
  STORE_URL_PATTERN,
  type KeySpec,
} from "./keys.js";

export type JsonSchema = { [key: string]: unknown };

export function buildSchema(): JsonSchema {
  return {
    $schema: "http://json-schema.org/draft-07/schema#",
    title: "cronvisor jobs.yaml",
    description: "Jobs and settings of the cronvisor daemon. Generated from src/config.ts KEYS.",
    ...objectSchema(KEYS),
  };
}

function objectSchema(table: Readonly<Record<string, KeySpec>>): JsonSchema {
  const required = Object.keys(table).filter((key) => table[key]?.required);
  return {
    type: "object",
    properties: Object.fromEntries(Object.entries(table).map(([k, s]) => [k, keySchema(s)])),
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
  };
}

function keySchema(spec: KeySpec): JsonSchema {
  const value = valueSchema(spec);
  const schema = spec.nullable
    ? { anyOf: [value, ...(spec.kind === "duration" ? [{ const: "none" }] : []), { type: "null" }] }
    : value;
  return {
    description: spec.doc,
    ...(spec.default !== undefined ? { default: spec.default } : {}),
    ...schema,
  };
}

// Maps and lists whose every entry is commented out read as null; the validator takes that as empty.
const MAP_OR_EMPTY = ["object", "null"];

/** The kinds that name locks, groups, jobs and windows (keys.ts), and the maps that define them. */
function linkSchema(spec: KeySpec): JsonSchema {
  switch (spec.kind) {
    case "name":
      return { type: "string", pattern: LOCK_NAME_PATTERN };
    case "names":
      return { type: "array", items: { type: "string", pattern: LOCK_NAME_PATTERN } };
    case "groups":
      return {
        type: MAP_OR_EMPTY,
        propertyNames: { pattern: LOCK_NAME_PATTERN },
        additionalProperties: objectSchema(spec.keys ?? {}),
      };
    case "jobrefs":
      return { type: ["array", "null"], items: { type: "string", pattern: JOB_NAME_PATTERN } };
    case "blackouts":
      return { type: ["array", "null"], items: { type: "string", pattern: "\\S" } };
    case "windows":
      return {
        type: MAP_OR_EMPTY,
        propertyNames: { pattern: JOB_NAME_PATTERN },
        additionalProperties: { type: "string", pattern: "\\S" },
      };
    default:
      throw new Error(`not a name kind: ${spec.kind}`);
  }
}

function valueSchema(spec: KeySpec): JsonSchema {
  switch (spec.kind) {
    case "string":
    case "path":
    case "timezone":
      return { type: "string", pattern: "\\S" };
    case "duration":
      return { type: "string", pattern: DURATION_PATTERN };
    case "size":
      return { type: "string", pattern: SIZE_PATTERN };
    case "percent":
      return { type: "string", pattern: PERCENT_PATTERN };
    case "count":
      return { type: "integer", minimum: spec.min ?? 0 };
    case "bool":
      return { type: "boolean" };
    case "enum":
      return { enum: [...(spec.values ?? [])] };
    case "schedule": {
      const macros = Object.keys(MACROS).join("|");
      return { type: "string", pattern: `^\\s*(${macros}|\\S+(\\s+\\S+){4,5})\\s*$` };
    }
    case "command":
      return {
        oneOf: [
          { type: "string", pattern: "\\S" },
          { type: "array", minItems: 1, items: { type: ["string", "number", "boolean"] } },
        ],
      };
    case "env":
      return {
        type: MAP_OR_EMPTY,
        propertyNames: { pattern: ENV_NAME_PATTERN, not: { pattern: `^${RESERVED_ENV_PREFIX}` } },
        additionalProperties: { type: ["string", "number", "boolean"] },
      };
    case "url":
      return { type: "string", format: "uri", pattern: "^https?://" };
    case "hostport":
      return { type: "string", pattern: HOSTPORT_PATTERN };
    case "store":
      return { type: "string", pattern: STORE_URL_PATTERN };
    case "node":
      return { type: "string", pattern: NODE_NAME_PATTERN };
    case "nodes":
      return { type: "array", minItems: 1, items: { type: "string", pattern: NODE_NAME_PATTERN } };
    case "number":
      return { type: "number" };
    case "alerts":
      // Each alert has exactly one of the keys.
      return {
        type: ["array", "null"],
        items: {
          oneOf: Object.entries(spec.keys ?? {}).map(([key, s]) => ({
            type: "object",
            properties: { [key]: keySchema(s) },
            required: [key],
            additionalProperties: false,
          })),
        },
      };
    case "name":
    case "names":
    case "groups":
    case "jobrefs":
    case "blackouts":
    case "windows":
      return linkSchema(spec);
    case "section":
    case "defaults":
      return { ...objectSchema(spec.keys ?? {}), type: MAP_OR_EMPTY };
    case "jobs":
      return {
        type: "object",
        propertyNames: { pattern: JOB_NAME_PATTERN },
        additionalProperties: objectSchema(spec.keys ?? {}),
      };
  }
}

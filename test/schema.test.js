import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { JOB_KEYS, KEYS, parseConfig } from "../dist/config/config.js";
import { parseDuration, parseSize } from "../dist/core/duration.js";
import { buildSchema } from "../dist/config/schema.js";
import { ROOT } from "./helpers.js";

const schema = buildSchema();

test("the committed schema is the generated one (run scripts/gen-schema.js)", () => {
  const committed = JSON.parse(
    fs.readFileSync(path.join(ROOT, "schema", "jobs.schema.json"), "utf8"),
  );
  assert.deepEqual(committed, JSON.parse(JSON.stringify(schema)));
});

test("every key of the table is in the schema, with its doc and default", () => {
  assert.deepEqual(Object.keys(schema.properties), Object.keys(KEYS));
  assert.deepEqual(schema.required, ["jobs"]);
  const jobSchema = schema.properties.jobs.additionalProperties;
  assert.deepEqual(Object.keys(jobSchema.properties), Object.keys(JOB_KEYS));
  assert.deepEqual(jobSchema.required, ["schedule", "command"]);
  assert.equal(jobSchema.additionalProperties, false);
  const defaults = schema.properties.defaults;
  assert.deepEqual(
    Object.keys(defaults.properties),
    Object.keys(JOB_KEYS).filter((k) => k !== "schedule" && k !== "command"),
  );
  assert.equal(jobSchema.properties.kill_grace.default, "10s");
  assert.equal(jobSchema.properties.log.properties.max_size.default, "1MB");
  assert.equal(jobSchema.properties.overlap.description, JOB_KEYS.overlap.doc);
  assert.deepEqual(jobSchema.properties.overlap.enum, ["skip", "queue", "replace", "allow"]);
});

test("every default in the table is one the validator accepts", () => {
  // A job that spells out each default must parse to the same job as one that leaves them out.
  const lines = [];
  for (const [key, spec] of Object.entries(JOB_KEYS)) {
    if (spec.kind === "section") {
      lines.push(`    ${key}:`);
      for (const [k, s] of Object.entries(spec.keys))
        lines.push(`      ${k}: ${JSON.stringify(s.default)}`);
    } else if (spec.default !== undefined) {
      lines.push(`    ${key}: ${JSON.stringify(spec.default)}`);
    }
  }
  const head = ["jobs:", "  a:", '    schedule: "@daily"', "    command: x"];
  const parse = (body) => parseConfig([...head, ...body, ""].join("\n"), "/x/jobs.yaml");
  const spelled = parse(lines);
  assert.deepEqual(spelled.errors, []);
  assert.deepEqual(spelled.config, parse([]).config);
});

test("the schema's patterns agree with the parsers", () => {
  const jobSchema = schema.properties.jobs.additionalProperties;
  const accepts = (pattern, text) => new RegExp(pattern).test(text);
  const parses = (parse, text) => {
    try {
      parse(text);
      return true;
    } catch {
      return false;
    }
  };
  const duration = jobSchema.properties.kill_grace.pattern;
  for (const text of ["30s", "1h30m", "500ms", "1.5h", "30", "5w", "1h 30m", "", "-1s", "s"]) {
    assert.equal(accepts(duration, text), parses(parseDuration, text), text);
  }
  const size = jobSchema.properties.log.properties.max_size.pattern;
  for (const text of ["10MB", "100B", "1.5GB", "10", "10mb", "1MB1KB", "MB"]) {
    assert.equal(accepts(size, text), parses(parseSize, text), text);
  }
  const name = schema.properties.jobs.propertyNames.pattern;
  const jobNamed = (n) =>
    parseConfig(`jobs:\n  "${n}": { schedule: "@daily", command: x }\n`, "/x/j.yaml");
  for (const n of [
    "backup",
    "db.dump-2",
    "0x",
    "Backup",
    "../x",
    "-x",
    "a".repeat(64),
    "a".repeat(65),
  ]) {
    assert.equal(accepts(name, n), jobNamed(n).errors.length === 0, n);
  }
  const http = schema.properties.http.anyOf[0].pattern;
  for (const text of ["127.0.0.1:9464", "[::1]:80", "localhost", "a b:1", ":80"]) {
    const ok = parseConfig(`http: "${text}"\njobs: {}\n`, "/x/j.yaml").errors.length === 0;
    assert.equal(accepts(http, text), ok, text);
  }
});

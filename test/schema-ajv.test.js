// The editor schema, checked with a standard JSON Schema validator (Ajv): the example config and
// the crontab importer's output validate; a typo does not.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import Ajv from "ajv";
import YAML from "yaml";
import { importCrontab } from "../dist/crontab/index.js";
import { ROOT } from "./helpers.js";

const schema = JSON.parse(fs.readFileSync(path.join(ROOT, "schema", "jobs.schema.json"), "utf8"));
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);

test("jobs.example.yaml validates against the schema it references", () => {
  const text = fs.readFileSync(path.join(ROOT, "jobs.example.yaml"), "utf8");
  assert.match(text, /^# yaml-language-server: \$schema=\.\/schema\/jobs\.schema\.json$/m);
  assert.equal(validate(YAML.parse(text)), true, JSON.stringify(validate.errors));
});

test("a crontab's imported YAML validates against the schema", () => {
  const crontab = [
    "SHELL=/bin/bash",
    "MAILTO=ops@example.com",
    "CRON_TZ=Europe/Berlin",
    "*/5 * * * * /usr/local/bin/poll.sh",
    "0 2 * * mon-fri flock -n /tmp/backup.lock /usr/local/bin/backup.sh --full",
    "@reboot /usr/local/bin/warm-cache",
    "30 4 1 * * timeout 5m chronic /usr/bin/report % body",
  ].join("\n");
  const res = importCrontab(`${crontab}\n`, { file: "crontab" });
  assert.deepEqual(res.errors, []);
  assert.equal(validate(YAML.parse(res.yaml)), true, JSON.stringify(validate.errors));
});

test("the schema refuses a typo and a bad enum, as the validator does", () => {
  const bad = YAML.parse(
    'jobs:\n  a:\n    schedule: "@daily"\n    comand: "true"\n    overlap: sometimes\n',
  );
  assert.equal(validate(bad), false);
  const messages = validate.errors.map((e) => `${e.instancePath} ${e.message}`);
  assert.ok(
    messages.some((m) => m.includes("/jobs/a") && m.includes("command")),
    messages.join("; "),
  );
  assert.ok(
    messages.some((m) => m.includes("/jobs/a/overlap")),
    messages.join("; "),
  );
});

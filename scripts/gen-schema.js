// Writes schema/jobs.schema.json from the key table in src/config/keys.ts. Run after a build:
//   npx tsc -p tsconfig.json && node scripts/gen-schema.js
// Formatted with the project's Prettier settings so `prettier --check` passes on the result.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as prettier from "prettier";
import { buildSchema } from "../dist/config/schema.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const out = path.join(root, "schema", "jobs.schema.json");
const options = (await prettier.resolveConfig(out)) ?? {};
const text = await prettier.format(JSON.stringify(buildSchema()), { ...options, filepath: out });
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, text);
console.log(`wrote ${path.relative(process.cwd(), out)}`);

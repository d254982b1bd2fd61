#!/usr/bin/env node
// tsc compiles src/ into dist/ but copies nothing else: copy the store's .sql migrations next to
// the compiled modules that read them (src/store/migrations/** -> dist/store/migrations/**).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const from = path.join(root, "src", "store", "migrations");
const to = path.join(root, "dist", "store", "migrations");
fs.rmSync(to, { recursive: true, force: true });
fs.cpSync(from, to, {
  recursive: true,
  filter: (f) => f.endsWith(".sql") || fs.statSync(f).isDirectory(),
});

#!/usr/bin/env node
// Compile the spawner (src/run/spawner.c) to dist/run/cronvisor-spawner with the system's C
// compiler, statically linked where the C library allows it (an exec then maps no shared
// library: the spawner starts once per daemon, but its children are forked from it, and a
// static image is smaller to copy). Every run starts through it (containment, the pid file, the
// exit file, accounting are written once, there): without a C compiler the build fails.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const src = path.join(root, "src", "run", "spawner.c");
const out = path.join(root, "dist", "run", "cronvisor-spawner");
const cc = process.env.CC || "cc";
const base = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o", out, src];
fs.rmSync(out, { force: true });
for (const extra of [["-static"], []]) {
  const r = spawnSync(cc, [...extra, ...base], { stdio: ["ignore", "inherit", "pipe"] });
  if (r.status === 0) process.exit(0);
  if (r.error) break; // no compiler at all
  if (extra.length === 0) process.stderr.write(r.stderr);
}
process.stderr.write(
  `cronvisor: could not compile ${path.relative(root, src)} with ${cc}: every run starts through it; install a C compiler and libc headers (apt-get install gcc libc6-dev)\n`,
);
process.exit(1);

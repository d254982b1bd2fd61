// `npm start` builds only when the build is missing or older than its sources, so that a second
// `npm start` starts the daemon at once instead of rebuilding for 13 s. `npm run build` ends with
// `--stamp`, which writes dist/.built; any file under src/ or scripts/, package.json,
// package-lock.json or tsconfig.json newer than it makes the build stale.
// --check: print `fresh` or `stale: FILE` and exit 0 or 1, building nothing.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const STAMP = path.join(ROOT, "dist", ".built");
const INPUTS = ["src", "scripts", "package.json", "package-lock.json", "tsconfig.json"];

/** The first input newer than the stamp, or null when the build is up to date. */
function staleBy() {
  let built;
  try {
    built = fs.statSync(STAMP).mtimeMs;
  } catch {
    return "no build yet";
  }
  const walk = (p) => {
    const st = fs.statSync(p, { throwIfNoEntry: false });
    if (!st) return null;
    if (!st.isDirectory()) return st.mtimeMs > built ? path.relative(ROOT, p) : null;
    for (const e of fs.readdirSync(p)) {
      const found = walk(path.join(p, e));
      if (found) return found;
    }
    return null;
  };
  for (const i of INPUTS) {
    const found = walk(path.join(ROOT, i));
    if (found) return `${found} changed since the last build`;
  }
  return null;
}

const arg = process.argv[2];
if (arg === "--stamp") {
  fs.writeFileSync(STAMP, `${new Date().toISOString()}\n`);
} else {
  const why = staleBy();
  if (arg === "--check") {
    console.log(why === null ? "fresh" : `stale: ${why}`);
    process.exitCode = why === null ? 0 : 1;
  } else if (why !== null) {
    console.error(`building (${why})`);
    const r = spawnSync("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: "inherit" });
    process.exitCode = r.status ?? 1;
  }
}

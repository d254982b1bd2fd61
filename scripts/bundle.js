// The last step of `npm run build`: the two entries bin/cronvisor starts, the CLI and the marker
// commands inside a job, bundled into dist/bundle/ as CommonJS, so that a `status` or a `mark`
// call loads two files of ours through Node's CommonJS loader instead of 36 or 13 modules through
// its ESM loader, which costs about 1 ms of CPU per module file in a fresh process, and more to
// start at all than the CommonJS one (BENCHMARKS.md, "Issue 16: status and mark start-up").
//
// Each entry is its own rollup build. Everything the fast path loads (a plain status: the config
// cache, health, the status reader of the store; a marker command: the store's marker path) is
// put in one chunk; what only other paths load (commander's commands, the daemon, the broker's
// client, `once`, the PostgreSQL engine) stays in chunks of its own, required when that path
// runs, as dist/ imports it. Packages stay external, required from node_modules (each of them
// has a CommonJS build), but for croner (INLINED below).
//
// The rest of dist/ is unchanged and still used: the library (dist/index.js), the worker threads
// and the tests. A bundled module's `import.meta.url` is rewritten to its own file's URL in
// dist/, so every path found from it (the migrations, the spawner, better-sqlite3 by its path,
// the worker threads, the config cache's key over the contents of dist/config, dist/schedule and
// dist/core) is the one the unbundled module finds.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { rollup } from "@rollup/wasm-node";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const dist = path.join(root, "dist");
const out = path.join(dist, "bundle");

const ENTRIES = [
  {
    name: "cli",
    input: "commands/cli.js",
    // A plain `status` (cli.ts's fast path): status.ts and what it imports when it runs.
    fast: [
      "commands/status.js",
      "config/config-cache.js",
      "health/status.js",
      "health/render.js",
      "store/store.js",
      "store/sqlite-status-store.js",
    ],
  },
  {
    name: "markers-cli",
    input: "markers/markers-cli.js",
    // `mark` and the others on the store's own connection (outside a run's broker).
    fast: ["store/sqlite-marker-store.js"],
  },
];

/**
 * Packages compiled into the chunks instead of required by name at run time. A require of a
 * package whose package.json has "exports" (croner's has) makes Node's CommonJS loader load its
 * ESM resolver first: about 3 ms of a fresh process, for one small file (BENCHMARKS.md, "Issue 16:
 * the config cache cut, croner compiled in, the bundle's own key"). Their ESM build is taken, as
 * dist/ imports them; their licence stays in node_modules/, where `npm install` put it.
 */
const INLINED = new Set(["croner"]);
const inlinePackages = {
  name: "inline-packages",
  resolveId(source) {
    return INLINED.has(source) ? fileURLToPath(import.meta.resolve(source)) : null;
  },
};

/**
 * The config cache's key names the modules that build a Config by a digest of their contents
 * (config-cache.ts, buildId). The bundle runs its own copy of that code, fixed now: the key of
 * this moment is written into it (BUNDLED_BUILD_ID), so a status call neither reads those modules
 * nor loads node:crypto for it (about 2.6 ms of CPU of a status call, config-cache.ts).
 */
const CACHE_MODULE = path.join(dist, "config", "config-cache.js");
const NO_BUILD_ID = "const BUNDLED_BUILD_ID = null;";
const bundledBuildId = {
  name: "bundled-build-id",
  async transform(code, id) {
    if (id !== CACHE_MODULE) return null;
    if (!code.includes(NO_BUILD_ID)) throw new Error(`${id}: no "${NO_BUILD_ID}" to fill in`);
    const { buildId } = await import(pathToFileURL(CACHE_MODULE).href);
    return {
      code: code.replace(NO_BUILD_ID, `const BUNDLED_BUILD_ID = ${JSON.stringify(buildId())};`),
      map: null,
    };
  },
};

/** Each bundled module's import.meta.url: its own file in dist/, found from its chunk. */
const ownImportMetaUrl = {
  name: "own-import-meta-url",
  resolveImportMeta(property, { chunkId, moduleId }) {
    if (property !== "url") return null;
    const rel = path.relative(path.dirname(path.join(out, chunkId)), moduleId);
    return `require("node:url").pathToFileURL(require("node:path").join(__dirname, ${JSON.stringify(rel)})).href`;
  },
};

/** rollup's manualChunks: the entry's fast path (its modules and their static imports) as one chunk. */
function fastChunk(entry) {
  let fast = null;
  return (id, { getModuleInfo }) => {
    if (fast === null) {
      fast = new Set();
      const walk = (m) => {
        const info = getModuleInfo(m);
        if (fast.has(m) || !info || info.isExternal) return;
        fast.add(m);
        for (const dep of info.importedIds) walk(dep);
      };
      for (const m of [entry.input, ...entry.fast]) walk(path.join(dist, m));
    }
    return fast.has(id) ? "fast" : undefined;
  };
}

fs.rmSync(out, { recursive: true, force: true });
for (const entry of ENTRIES) {
  const bundle = await rollup({
    input: { [entry.name]: path.join(dist, entry.input) },
    external: (id) => !id.startsWith(".") && !path.isAbsolute(id) && !INLINED.has(id),
    plugins: [inlinePackages, bundledBuildId, ownImportMetaUrl],
  });
  await bundle.write({
    dir: out,
    format: "cjs",
    entryFileNames: "[name].cjs",
    // The fast chunk by a fixed name: bin/cronvisor loads it with its code cache
    // (scripts/code-cache.js) before the entry requires it.
    chunkFileNames: (chunk) =>
      chunk.name === "fast" ? `${entry.name}-fast.cjs` : `${entry.name}-[name]-[hash].cjs`,
    // import() of a builtin or a package becomes a require() too: no ESM loader at all.
    dynamicImportInCjs: false,
    manualChunks: fastChunk(entry),
  });
  await bundle.close();
}

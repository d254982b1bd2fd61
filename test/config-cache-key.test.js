// The key of the validated-config cache that `status` reads (src/config/config-cache.ts) must
// change whenever any module that turns YAML into a Config changes, without a hand-kept list:
// otherwise a rebuilt cronvisor would serve the old build's Config from the cache. Each check
// runs a fresh node over a copy of dist/ (the key is computed once per process), and tells a
// cache hit from a real parse by a value planted in the cache file.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { ROOT, tmpdir, writeConfig } from "./helpers.js";

const PLANTED = "from the cache";
const FOLDERS = ["config", "schedule", "core"];

/** A copy of the build (dist/, package.json, node_modules) and a config with its state dir. */
function setup(t) {
  const dir = tmpdir(t, "cvx-cachekey-");
  const build = path.join(dir, "build");
  fs.cpSync(path.join(ROOT, "dist"), path.join(build, "dist"), { recursive: true });
  fs.copyFileSync(path.join(ROOT, "package.json"), path.join(build, "package.json"));
  fs.symlinkSync(
    fs.realpathSync(path.join(ROOT, "node_modules")),
    path.join(build, "node_modules"),
  );
  const cfg = writeConfig(
    dir,
    [
      "state_dir: ./state",
      "jobs:",
      "  a:",
      '    schedule: "0 2 * * *"',
      '    command: "true"',
      "",
    ].join("\n"),
  );
  fs.mkdirSync(path.join(dir, "state"), { mode: 0o700 });
  return {
    dist: path.join(build, "dist"),
    cfg,
    cache: path.join(dir, "state", "config-cache.json"),
  };
}

/** The first job's schedule as `loadConfigCached` returns it, in a fresh process. */
function loadedSchedule(dist, cfg) {
  const mod = pathToFileURL(path.join(dist, "config", "config-cache.js")).href;
  const script =
    "const { loadConfigCached } = await import(process.argv[1]);" +
    "const r = await loadConfigCached(process.argv[2]);" +
    "process.stdout.write(JSON.stringify(r.config.jobs[0].schedule));";
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script, mod, cfg], {
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

/** Plant a value in the cached config, leaving its key alone: a hit returns it. */
function plant(cache) {
  const c = JSON.parse(fs.readFileSync(cache, "utf8"));
  c.config.jobs[0].schedule = PLANTED;
  fs.writeFileSync(cache, JSON.stringify(c));
}

/** Every .js module under dist/<folder>/, as paths relative to dist/. */
function modules(dist) {
  const out = [];
  for (const folder of FOLDERS) {
    for (const name of fs.readdirSync(path.join(dist, folder), { recursive: true })) {
      if (String(name).endsWith(".js")) out.push(path.join(folder, String(name)));
    }
  }
  return out.sort();
}

test("the cache is used while no module changes, and not after any module of config/, schedule/ or core/ changes", (t) => {
  const { dist, cfg, cache } = setup(t);
  assert.equal(loadedSchedule(dist, cfg), "0 2 * * *", "no cache yet: a real parse");
  plant(cache);
  assert.equal(loadedSchedule(dist, cfg), PLANTED, "same build, same file: a cache hit");

  const changed = modules(dist);
  assert.ok(changed.includes(path.join("config", "walk.js")), changed.join(" "));
  for (const [i, rel] of changed.entries()) {
    plant(cache);
    // A rebuild rewrites the module: a new mtime (a fixed, distinct one: no waiting on the clock).
    const when = new Date(Date.UTC(2001, 0, 1, 0, 0, i));
    fs.utimesSync(path.join(dist, rel), when, when);
    assert.equal(loadedSchedule(dist, cfg), "0 2 * * *", `${rel} changed but the cache was used`);
  }
  plant(cache);
  assert.equal(loadedSchedule(dist, cfg), PLANTED, "nothing changed since the last parse: a hit");
});

test("a new module, or a module rewritten at the same mtime with another size, changes the key", (t) => {
  const { dist, cfg, cache } = setup(t);
  loadedSchedule(dist, cfg);

  plant(cache);
  fs.writeFileSync(path.join(dist, "config", "a-later-split.js"), "export {};\n");
  assert.equal(
    loadedSchedule(dist, cfg),
    "0 2 * * *",
    "a module added to config/ must change the key",
  );

  plant(cache);
  const syntax = path.join(dist, "schedule", "syntax.js");
  const st = fs.statSync(syntax);
  fs.appendFileSync(syntax, "// rebuilt\n");
  fs.utimesSync(syntax, st.atime, st.mtime);
  assert.equal(
    loadedSchedule(dist, cfg),
    "0 2 * * *",
    "a module of another size must change the key",
  );

  plant(cache);
  assert.equal(loadedSchedule(dist, cfg), PLANTED);
});

// The key of the validated-config cache that `status` reads (src/config/config-cache.ts) must
// change whenever any module that turns YAML into a Config changes, without a hand-kept list:
// otherwise a rebuilt cronvisor would serve the old build's Config from the cache. It is made of
// the modules' contents, not their mtimes: a copy of the build keeps its cache, and the bundle
// and dist/ find each other's entries (issue 38: with mtimes they evicted each other). Each check
// runs a fresh node over a copy of the build (the key is computed once per process), and tells a
// cache hit from a real parse by a value planted in the cache file.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { ROOT, cleanEnv, cli, tmpdir, writeConfig } from "./helpers.js";

const PLANTED = "from the cache";
const FOLDERS = ["config", "schedule", "core"];

/**
 * A copy of the build (bin/, dist/, package.json, node_modules), every file with a new mtime
 * (cpSync does not keep them), and a config with its state dir.
 */
function setup(t) {
  const dir = tmpdir(t, "cvx-cachekey-");
  const build = path.join(dir, "build");
  fs.cpSync(path.join(ROOT, "dist"), path.join(build, "dist"), { recursive: true });
  fs.cpSync(path.join(ROOT, "bin"), path.join(build, "bin"), { recursive: true });
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
    bin: path.join(build, "bin", "cronvisor"),
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

test("the cache is used while no module's content changes (new mtimes too), and not after any module of config/, schedule/ or core/ changes", (t) => {
  const { dist, cfg, cache } = setup(t);
  assert.equal(loadedSchedule(dist, cfg), "0 2 * * *", "no cache yet: a real parse");
  plant(cache);
  assert.equal(loadedSchedule(dist, cfg), PLANTED, "same build, same file: a cache hit");

  const changed = modules(dist);
  assert.ok(changed.includes(path.join("config", "walk.js")), changed.join(" "));
  // Every module touched (a copy, a checkout, a `touch`): the same contents, so still a hit.
  for (const [i, rel] of changed.entries()) {
    const when = new Date(Date.UTC(2001, 0, 1, 0, 0, i));
    fs.utimesSync(path.join(dist, rel), when, when);
  }
  assert.equal(loadedSchedule(dist, cfg), PLANTED, "new mtimes, the same contents: a hit");
  for (const rel of changed) {
    plant(cache);
    fs.appendFileSync(path.join(dist, rel), "// rebuilt\n");
    assert.equal(loadedSchedule(dist, cfg), "0 2 * * *", `${rel} changed but the cache was used`);
  }
  plant(cache);
  assert.equal(loadedSchedule(dist, cfg), PLANTED, "nothing changed since the last parse: a hit");
});

test("a new module, or a module rewritten at the same size and mtime, changes the key", (t) => {
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
  const text = fs.readFileSync(syntax, "utf8");
  const i = text.lastIndexOf("//");
  assert.ok(i > 0, "syntax.js has a comment to change");
  fs.writeFileSync(syntax, `${text.slice(0, i)}//X${text.slice(i + 3)}`);
  fs.utimesSync(syntax, st.atime, st.mtime);
  assert.equal(fs.statSync(syntax).size, st.size);
  assert.equal(
    loadedSchedule(dist, cfg),
    "0 2 * * *",
    "a module with other contents must change the key, whatever its size and mtime",
  );

  plant(cache);
  assert.equal(loadedSchedule(dist, cfg), PLANTED);
});

test("in a copy of the build, the bundle's status and dist/'s modules use one cache entry", (t) => {
  const { bin, dist, cfg, cache } = setup(t);
  const status = () => {
    const r = spawnSync(process.execPath, [bin, "status", "--json", "-c", cfg], {
      encoding: "utf8",
      env: cleanEnv(),
    });
    assert.equal(r.status, 0, r.stderr);
  };
  assert.equal(cli(["run", "a", "-c", cfg]).code, 0, "a store for status to read");
  fs.rmSync(cache, { force: true });
  status(); // a miss: the bundle parses and writes the cache
  plant(cache);
  assert.equal(loadedSchedule(dist, cfg), PLANTED, "dist/ finds the bundle's entry");
  status(); // a hit: a miss would parse again and write the cache over the planted value
  assert.equal(JSON.parse(fs.readFileSync(cache, "utf8")).config.jobs[0].schedule, PLANTED);
});

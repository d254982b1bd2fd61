// What keeps the CLI's start-up fast: a plain `status` never loads commander, and the commander
// wiring loads a subcommand's module only when that command runs; no SQLite path loads pg. Plus the
// daemon's signals.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  BIN,
  cli,
  ROOT,
  cleanEnv,
  reserveManualRun,
  tmpdir,
  waitFor,
  writeConfig,
  readStore,
} from "./helpers.js";

const DIST = path.join(ROOT, "dist", "commands");

/** Run main(argv) in a fresh node; report its exit code, stdout and which packages it loaded. */
function probe(args) {
  const script = `
    import { createRequire } from "node:module";
    const require = createRequire(import.meta.url);
    process.on("exit", () => {
      const loaded = (name) => Object.keys(require.cache).some((k) => k.includes(\`/node_modules/\${name}/\`));
      const probe = { commander: loaded("commander"), sqlite: loaded("better-sqlite3"), pg: loaded("pg"), bindings: loaded("bindings") };
      process.stderr.write("\\nPROBE " + JSON.stringify(probe) + "\\n");
    });
    const { main } = await import(${JSON.stringify(path.join(DIST, "cli.js"))});
    await main([process.execPath, "cronvisor", ...${JSON.stringify(args)}]);
  `;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    encoding: "utf8",
    env: cleanEnv(),
  });
  const m = /PROBE (\{.*\})/.exec(r.stderr);
  assert.ok(m, `probe output: ${r.stderr}`);
  return { code: r.status, stdout: r.stdout, ...JSON.parse(m[1]) };
}

/**
 * An `--import` module that registers an ESM loader hook (`resolve` or `load`) appending each
 * specifier or URL it sees to `log`, one a line.
 */
function hookRegistering(hook, log) {
  const hooks = `import fs from "node:fs";
    export async function ${hook}(what, context, next) {
      fs.appendFileSync(${JSON.stringify(log)}, what + "\\n");
      return next(what, context);
    }`;
  return `import { register } from "node:module";
    register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
}

test("a plain status call does not load commander; other commands do", (t) => {
  const dir = tmpdir(t);
  const file = writeConfig(
    dir,
    `state_dir: ${path.join(dir, "state")}\njobs:\n  a: { schedule: "* * * * *", command: "true" }\n`,
  );
  const plain = probe(["status", "--check", "-c", file]);
  assert.equal(plain.code, 3);
  assert.match(plain.stdout, /^UNKNOWN: no state store/);
  assert.equal(plain.commander, false);
  const other = probe(["next", "-c", file]);
  assert.equal(other.code, 0);
  assert.equal(other.commander, true);
  // Not a plain call (an unknown option): commander reads it and prints its usage error.
  const odd = probe(["status", "--bogus", "-c", file]);
  assert.equal(odd.code, 2);
  assert.equal(odd.commander, true);
  // The SQLite store's paths never load pg (the PostgreSQL engine is imported only by its opener).
  const pause = probe(["pause", "a", "-c", file]);
  assert.equal(pause.code, 0);
  assert.equal(pause.sqlite, true);
  const status = probe(["status", "-c", file]);
  assert.equal(status.code, 0);
  for (const r of [plain, other, odd, pause, status]) assert.equal(r.pg, false);
  // better-sqlite3's addon is required by its path (store-file.ts): the `bindings` package,
  // which walks a stack and probes a dozen paths to find it, is never loaded.
  for (const r of [pause, status]) assert.equal(r.bindings, false);
});

test("the commander wiring imports no subcommand module at load time", () => {
  const src = fs.readFileSync(path.join(DIST, "program.js"), "utf8");
  const staticImports = [...src.matchAll(/^import\s[^;]*?from\s+"([^"]+)"/gm)].map((m) => m[1]);
  assert.deepEqual(
    staticImports.filter((s) => s.startsWith(".")),
    [],
    "program.js must import its subcommands with import() inside their actions",
  );
  const cli = fs.readFileSync(path.join(DIST, "cli.js"), "utf8");
  const cliImports = [...cli.matchAll(/^import\s[^;]*?from\s+"([^"]+)"/gm)].map((m) => m[1]);
  assert.deepEqual(cliImports.sort(), ["./args.js", "./shared.js"]);
});

test("daemon signals: a failed reload is logged and the daemon keeps going; TERM stops, a second forces", async (t) => {
  const dir = tmpdir(t);
  const script = `
    import { handleDaemonSignals } from ${JSON.stringify(path.join(DIST, "daemon-signals.js"))};
    let release;
    handleDaemonSignals({
      reload: async () => { process.stdout.write("reload\\n"); throw new Error("boom"); },
      stop: () => { process.stdout.write("stop\\n"); return new Promise((r) => (release = r)); },
      force: () => { process.stdout.write("force\\n"); release(); },
    });
    process.stdout.write("ready\\n");
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    cwd: dir,
    env: cleanEnv(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  t.after(() => child.kill("SIGKILL"));
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  // 'close', not 'exit': the last lines asserted below are written right before the exit, and
  // 'exit' can come before they have been read from the pipes.
  const exited = new Promise((r) => child.on("close", (code, signal) => r({ code, signal })));
  await waitFor(() => out.includes("ready"), "ready");
  child.kill("SIGHUP");
  await waitFor(() => err.includes("cronvisor: reload failed: boom"), "the reload failure logged");
  assert.equal(child.exitCode, null, "still running after a failed reload");
  child.kill("SIGTERM");
  await waitFor(() => out.includes("stop"), "stop called");
  assert.match(err, /cronvisor: SIGTERM: stopping \(again to force\)/);
  child.kill("SIGINT");
  assert.deepEqual(await exited, { code: 0, signal: null });
  assert.match(err, /cronvisor: SIGINT again: killing every run now/);
  assert.equal(out, "ready\nreload\nstop\nforce\n");
});

/**
 * The modules a file loads before any of its code runs: its static imports, and theirs (dist/
 * files relative to dist/, builtins as `node:x`). import() inside a function is not followed.
 */
function staticClosure(entry) {
  const dist = path.join(ROOT, "dist");
  const seen = new Set();
  const walk = (file) => {
    const rel = path.relative(dist, file);
    if (seen.has(rel)) return;
    seen.add(rel);
    const src = fs.readFileSync(file, "utf8");
    for (const m of src.matchAll(/^(?:import|export)\s(?:[^;]*?\sfrom\s)?\s*"([^"]+)"/gm)) {
      if (m[1].startsWith(".")) walk(path.resolve(path.dirname(file), m[1]));
      else seen.add(m[1]);
    }
  };
  walk(path.join(dist, entry));
  return [...seen].sort();
}

test("a marker command inside a job loads only its own path: no store engine before it is opened, no broker client without a broker", () => {
  // Each module file and builtin is start-up time paid by every `mark` call (BENCHMARKS.md).
  assert.deepEqual(staticClosure("markers/markers-cli.js"), [
    "core/exit.js",
    "core/printable.js",
    "markers/markers-cli.js",
    "markers/target.js",
    "node:fs",
    "node:module",
    "node:path",
    "store/errors.js",
    "store/store.js",
  ]);
  // Through the broker, imported only when the run has one: the socket, never SQLite or crypto.
  assert.deepEqual(staticClosure("markers/broker-client.js"), [
    "core/exit.js",
    "markers/broker-client.js",
    "markers/broker-protocol.js",
    "markers/target.js",
    "node:module",
    "node:net",
    "node:path",
    "store/errors.js",
    "store/store.js",
  ]);
  // Without one, the store's marker path: no socket, worker thread, crypto or child process.
  const local = staticClosure("store/sqlite-marker-store.js");
  for (const heavy of ["node:net", "node:worker_threads", "node:crypto", "node:child_process"])
    assert.ok(!local.includes(heavy), `${heavy} in ${local.join(" ")}`);
});

test("`status` opens a store that loads only the table groups it reads", () => {
  // The status reader (sqlite-status-store.js): daemon, history, jobs (and the events it writes
  // with), markers and status reads; never the run writes (runs.js) or `why`'s reads, each of
  // them start-up time of every status call.
  const groups = staticClosure("store/sqlite-status-store.js").filter((m) =>
    m.startsWith("store/sqlite/"),
  );
  assert.deepEqual(groups, [
    "store/sqlite/daemon.js",
    "store/sqlite/events.js",
    "store/sqlite/history.js",
    "store/sqlite/jobs.js",
    "store/sqlite/markers.js",
    "store/sqlite/status.js",
  ]);
  // And a plain status call reaches the store through it, not through the full SqliteStore.
  const shared = fs.readFileSync(path.join(DIST, "shared.js"), "utf8");
  assert.match(shared, /\bstore\.openStatusStoreAt\b/);
  const status = fs.readFileSync(path.join(DIST, "status.js"), "utf8");
  assert.match(status, /await openStatusStoreOrEmpty\(config[,)]/);
});

test("`status` asks for the config cache's module with its own, health's and the store's before the config is read", (t) => {
  // Node's ESM loader reads module files through the thread pool: asked for first, those reads
  // overlap the config check instead of following it. A resolve hook (on the hooks thread, which
  // receives the requests in the order they are made) records the order of the requests.
  const dir = tmpdir(t);
  const file = writeConfig(
    dir,
    `state_dir: ${path.join(dir, "state")}\njobs:\n  a: { schedule: "* * * * *", command: "true" }\n`,
  );
  const log = path.join(dir, "resolved.txt");
  const register = hookRegistering("resolve", log);
  // The unbundled entry: bin/cronvisor runs the bundle (scripts/bundle.js), where the fast path
  // is one module file, and these requests resolve to it without a read.
  const main = `const { main } = await import(${JSON.stringify(path.join(DIST, "cli.js"))});
    await main([process.execPath, "cronvisor", "status", "-c", ${JSON.stringify(file)}]);`;
  const r = spawnSync(
    process.execPath,
    [
      "--import",
      `data:text/javascript,${encodeURIComponent(register)}`,
      "--input-type=module",
      "-e",
      main,
    ],
    { encoding: "utf8", env: cleanEnv() },
  );
  assert.equal(r.status, 3, r.stderr); // no store yet: UNKNOWN, after the config was read
  const asked = fs.readFileSync(log, "utf8").split("\n");
  const at = (m) => {
    const i = asked.findIndex((s) => s.endsWith(m));
    assert.ok(i >= 0, `${m} never asked for: ${asked.join(" ")}`);
    return i;
  };
  // cli.ts asks for the config cache's module with status's own; the config check asks again
  // (loadForReading), by which time health's and the store's were asked for (status.ts).
  assert.ok(at("/config/config-cache.js") < at("./status.js"), asked.join(" "));
  const check = asked.lastIndexOf("../config/config-cache.js");
  assert.ok(at("/health/status.js") < check, asked.join(" "));
  assert.ok(at("/store/store.js") < check, asked.join(" "));
});

/**
 * Run bin/cronvisor with ARGS; the files it loads, through either of Node's loaders (ours
 * relative to ROOT, packages by name).
 */
function loadedFiles(t, args, env = {}) {
  const dir = tmpdir(t);
  const log = path.join(dir, "loaded.txt");
  // CommonJS: what require.cache holds at the exit. ESM: what a load hook was asked for.
  // Builtins: node:crypto, whether the main thread loaded it (process.moduleLoadList).
  const preload = path.join(dir, "preload.cjs");
  fs.writeFileSync(
    preload,
    `process.on("exit", () => require("node:fs").appendFileSync(${JSON.stringify(log)},
      Object.keys(require.cache).map((f) => require("node:url").pathToFileURL(f).href + "\\n").join("") +
      "crypto:" + process.moduleLoadList.includes("NativeModule crypto") + "\\n"));`,
  );
  const register = hookRegistering("load", log);
  const r = spawnSync(
    process.execPath,
    [
      "-r",
      preload,
      "--import",
      `data:text/javascript,${encodeURIComponent(register)}`,
      BIN,
      ...args,
    ],
    { encoding: "utf8", env: cleanEnv(env) },
  );
  const files = fs
    .readFileSync(log, "utf8")
    .split("\n")
    .filter((u) => u.startsWith("file:") && !u.endsWith("/preload.cjs"))
    .map((u) => {
      const rel = path.relative(ROOT, fileURLToPath(u));
      const pkg = /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(rel);
      if (pkg) return pkg[1];
      // rollup's chunks carry a hash in their name; the fast chunks a fixed one.
      return rel.endsWith("-fast.cjs") ? rel : rel.replace(/-[\w-]{8}\.cjs$/, "-HASH.cjs");
    });
  const crypto = /^crypto:(true|false)$/m.exec(fs.readFileSync(log, "utf8"));
  assert.ok(crypto, "the preload says whether node:crypto was loaded");
  return {
    code: r.status,
    stderr: r.stderr,
    files: [...new Set(files)].sort(),
    crypto: crypto[1] === "true",
  };
}

test("bin/cronvisor runs the bundles: a plain status and a marker command load one chunk of ours besides their entry", async (t) => {
  // Every module file is start-up time of each call (about 1 ms of CPU in Node 20's ESM loader):
  // the fast paths are bundled as CommonJS by `npm run build` (scripts/bundle.js), and load none
  // of dist/'s own modules.
  const dir = tmpdir(t);
  const state = path.join(dir, "state");
  fs.mkdirSync(state, { mode: 0o700 });
  const file = writeConfig(
    dir,
    `state_dir: ${state}\njobs:\n  a: { schedule: "* * * * *", command: "true" }\n`,
  );
  const { SqliteStore } = await import(path.join(ROOT, "dist", "store", "sqlite-store.js"));
  const store = SqliteStore.open(state, { create: true });
  const run = await reserveManualRun(store, state, "a");
  await store.close();
  // The first call parses the config (a cache miss loads the parser and yaml) and caches it.
  assert.equal(loadedFiles(t, ["status", "--json", "-c", file]).code, 0);
  const status = loadedFiles(t, ["status", "--json", "-c", file]);
  assert.equal(status.code, 0, status.stderr);
  // croner is compiled into the chunk: a require of it by name (its package.json has "exports")
  // loaded Node's ESM resolver into the CommonJS loader, about 3 ms of each call.
  // bin/cronvisor calls the fast chunk's main itself: cli.cjs, which only re-exports it, is not
  // read (about 1 ms of each call).
  assert.deepEqual(status.files, ["better-sqlite3", "bin/cronvisor", "dist/bundle/cli-fast.cjs"]);
  // node:crypto and the stream modules it loads are about 7 ms of a fresh process: the config
  // cache's key is compared whole, not hashed (config-cache.ts).
  assert.equal(status.crypto, false, "a plain status loads no node:crypto");
  const env = {
    CRONVISOR_STATE_DIR: state,
    CRONVISOR_JOB: "a",
    CRONVISOR_RUN_ID: String(run.id),
    CRONVISOR_FENCE: String(run.fence),
  };
  const mark = loadedFiles(t, ["mark", "k1"], env);
  assert.equal(mark.code, 0, mark.stderr);
  assert.deepEqual(mark.files, [
    "better-sqlite3",
    "bin/cronvisor",
    "dist/bundle/markers-cli-fast.cjs",
    "dist/bundle/markers-cli.cjs",
  ]);
  assert.deepEqual(readStore(state).markerKeys(), ["k1"]);
});

test("a plain status from the bundle looks at none of dist/'s modules: the config cache's key for its code was computed when it was built", (t) => {
  // The key names the modules that build a Config (config-cache.ts); in the bundle that code is
  // the bundle's own, fixed when scripts/bundle.js made it, so their stats (about 30 a call) are
  // taken then, not at each status.
  const dir = tmpdir(t);
  const file = writeConfig(
    dir,
    `state_dir: ./state\njobs:\n  a: { schedule: "@daily", command: "true" }\n`,
  );
  assert.equal(cli(["run", "a", "-c", file]).code, 0);
  const log = path.join(dir, "looked.txt");
  const preload = path.join(dir, "spy.cjs");
  fs.writeFileSync(
    preload,
    `const fs = require("node:fs"); const seen = [];
    for (const n of ["statSync", "lstatSync", "readdirSync", "openSync", "existsSync"]) {
      const f = fs[n];
      fs[n] = function (p, ...a) { seen.push(String(p)); return f.call(this, p, ...a); };
    }
    process.on("exit", () => fs.writeFileSync(${JSON.stringify(log)}, seen.join("\\n")));`,
  );
  const dist = path.join(ROOT, "dist") + path.sep;
  const bundle = path.join(ROOT, "dist", "bundle") + path.sep;
  const looked = () =>
    fs
      .readFileSync(log, "utf8")
      .split("\n")
      .filter((p) => p.startsWith(dist) && !p.startsWith(bundle));
  const args = ["-r", preload, BIN, "status", "--json", "-c", file];
  // The first call parses and writes the cache; the second is a plain hit.
  for (const call of ["miss", "hit"]) {
    const r = spawnSync(process.execPath, args, { encoding: "utf8", env: cleanEnv() });
    assert.equal(r.status, 0, r.stderr);
    if (call === "hit") assert.deepEqual(looked(), []);
  }
  // ... and dist/'s own modules, computing the key from their files, find the same cache.
  const script =
    "const { loadConfigCached } = await import(process.argv[1]);" +
    "const r = await loadConfigCached(process.argv[2]);" +
    "process.stdout.write(String(r.config.jobs[0].command));";
  const cache = path.join(dir, "state", "config-cache.json");
  const c = JSON.parse(fs.readFileSync(cache, "utf8"));
  c.config.jobs[0].command = "planted";
  fs.writeFileSync(cache, JSON.stringify(c));
  const mod = pathToFileURL(path.join(ROOT, "dist", "config", "config-cache.js")).href;
  const r = spawnSync(process.execPath, ["--input-type=module", "-e", script, mod, file], {
    encoding: "utf8",
  });
  assert.equal(r.stdout, "planted", "the bundle's key is the one dist/'s modules compute");
});

test("the bundles bin/cronvisor runs are made from this dist/ (npm run build, not tsc alone)", () => {
  // scripts/bundle.js is the build's last step: a module of dist/ newer than the bundle means
  // `tsc` ran without it, and bin/cronvisor would run the code from before.
  const bundle = path.join(ROOT, "dist", "bundle");
  const made = Math.min(
    ...fs.readdirSync(bundle).map((f) => fs.statSync(path.join(bundle, f)).mtimeMs),
  );
  const newer = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (full !== bundle) walk(full);
      } else if (e.name.endsWith(".js") && fs.statSync(full).mtimeMs > made) newer.push(full);
    }
  };
  walk(path.join(ROOT, "dist"));
  assert.deepEqual(newer, [], "run `npm run build`: these are newer than dist/bundle/");
});

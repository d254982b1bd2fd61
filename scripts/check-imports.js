// Rejects import cycles in src/ and imports against the allowed direction between its folders.
//   node scripts/check-imports.js [ROOT]      (ROOT: the source tree, src/ of this repository by default)
//   node scripts/check-imports.js --table     prints the folder table as ARCHITECTURE.md shows it
//   node scripts/check-imports.js --write-table   rewrites that table in ARCHITECTURE.md
// Exit 0 when clean, 1 on a cycle or a forbidden import, 2 on a usage error. Run by `npm run lint`;
// test/check-imports.test.js compares ARCHITECTURE.md's table with --table's.
//
// It reads the TypeScript sources, not dist/, so it needs no build. Every relative import counts:
// static, `import type`, `export ... from`, `import("./x.js")` and `typeof import("./x.js")`.
// Type-only and lazy imports count because they still tie two modules together: a type-only cycle
// is the store/health knot the folders exist to undo, and a lazy one still means neither module
// can be understood, tested or split without the other. A `.js` specifier names the `.ts` file
// beside it (NodeNext resolution). Packages and node: builtins are not checked.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ANY = "*";
const from = (...folders) => Object.fromEntries(folders.map((f) => [f, ANY]));

// Who may import each folder: importer folder -> ANY, or the only files of the folder it may
// import. A file always imports its own folder's files. "." is a file directly in ROOT
// (src/index.ts, the library entry). A folder missing from this table is an error, so a new
// folder gets a line here when it is made (then `--write-table` for ARCHITECTURE.md).
const IMPORTERS = {
  core: ANY,
  schedule: from("config", "daemon", "health", "monitor", "commands"),
  store: from("daemon", "markers", "health", "monitor", "run", "commands"),
  // process handling; alert commands get a job-like environment (env.ts). A run's liveness
  // (pid + start time, its group, its cgroup) is core/proc.ts, shared by run, markers and health.
  run: {
    ...from("daemon", "commands"),
    monitor: ["env.ts"],
  },
  health: from("monitor", "commands"),
  config: from("commands"),
  daemon: from("commands"), // commands/ hands monitor/'s hooks to the supervisor
  markers: from("commands", "."),
  // The observers' contract (SupervisorHooks, types only) lives with its implementer: the daemon
  // imports that one file, and monitor/ never imports daemon/.
  monitor: { ...from("commands"), daemon: ["hooks.ts"] },
  crontab: from("commands"),
  commands: {}, // only bin/ (outside src/) loads the CLI
  ".": {}, // nothing imports the library entry
};

// Why an arrow exists, where it is not obvious: a note after the folder's row of --table.
const NOTES = {
  core: "types, durations, process identity; it imports nothing of ours",
  schedule: "monitor for the page's `why`, which reads a TIME",
  run: "monitor's alert commands get a job-like environment",
  monitor: "the daemon's observers' contract (`SupervisorHooks`, types) lives with its implementer",
  commands: "only `bin/cronvisor` loads the CLI",
};

// Temporary exceptions, as "from -> to" paths relative to ROOT, e.g.
// "config/config-cache.ts -> config/config.ts". An allowed import is left out of both checks,
// and every entry is printed as a warning on each run (and one that matches nothing, too), so an
// exception cannot be forgotten. Keep it empty.
const ALLOW = [];

/** Every .ts file under root (not .d.ts), sorted, as absolute paths. */
function sourceFiles(root) {
  const out = [];
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) out.push(full);
    }
  };
  walk(root);
  return out.sort();
}

/** An import declaration's kind: "type" when it brings in types only (erased by tsc). */
function declarationKind(node) {
  if (ts.isExportDeclaration(node)) return node.isTypeOnly ? "type" : "static";
  const clause = node.importClause;
  if (!clause) return "static"; // import "./x.js": for its side effects
  if (clause.isTypeOnly) return "type";
  const named = clause.namedBindings;
  const allTypes =
    !clause.name && named && ts.isNamedImports(named) && named.elements.length > 0
      ? named.elements.every((e) => e.isTypeOnly)
      : false;
  return allTypes ? "type" : "static";
}

/** The relative module specifiers a file names, with their line and kind. */
function importsOf(file) {
  const text = fs.readFileSync(file, "utf8");
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found = [];
  const add = (literal, kind) => {
    if (!literal || !ts.isStringLiteralLike(literal) || !literal.text.startsWith(".")) return;
    const line = source.getLineAndCharacterOfPosition(literal.getStart(source)).line + 1;
    found.push({ specifier: literal.text, line, kind });
  };
  const visit = (node) => {
    if (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) {
      add(node.moduleSpecifier, declarationKind(node));
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      add(node.arguments[0], "dynamic");
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      add(node.argument.literal, "type");
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference)
    ) {
      add(node.moduleReference.expression, "static");
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The .ts file a relative specifier names, or null when it is not one of ours. */
function resolve(fromFile, specifier, known) {
  const target = path.resolve(path.dirname(fromFile), specifier);
  const candidates = [
    target.replace(/\.js$/, ".ts"),
    target.replace(/\.mjs$/, ".mts"),
    target,
    `${target}.ts`,
    path.join(target, "index.ts"),
  ];
  return candidates.find((c) => known.has(c)) ?? null;
}

/** Strongly connected components (Tarjan), each a list of files; singletons included. */
function components(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const onStack = new Set();
  const out = [];
  let next = 0;
  const connect = (v) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const { to } of graph.get(v)) {
      if (!index.has(to)) {
        connect(to);
        low.set(v, Math.min(low.get(v), low.get(to)));
      } else if (onStack.has(to)) {
        low.set(v, Math.min(low.get(v), index.get(to)));
      }
    }
    if (low.get(v) !== index.get(v)) return;
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    out.push(component);
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  return out;
}

/** The shortest chain of edges from start back to start inside one component. */
function shortestCycle(graph, start, members) {
  const cameBy = new Map(); // file -> the edge that first reached it
  let frontier = [start];
  while (frontier.length > 0) {
    const nextFrontier = [];
    for (const v of frontier) {
      for (const edge of graph.get(v)) {
        if (!members.has(edge.to) || cameBy.has(edge.to)) continue;
        cameBy.set(edge.to, edge);
        if (edge.to === start) {
          const chain = [];
          for (let e = edge; ; e = cameBy.get(e.from)) {
            chain.unshift(e);
            if (e.from === start) return chain;
          }
        }
        nextFrontier.push(edge.to);
      }
    }
    frontier = nextFrontier;
  }
  return null;
}

/** Every distinct shortest cycle through some file, one per rotation-free chain. */
function cycles(graph) {
  const found = new Map();
  for (const component of components(graph)) {
    const members = new Set(component);
    const selfLoop =
      component.length === 1 && graph.get(component[0]).some((e) => e.to === component[0]);
    if (component.length === 1 && !selfLoop) continue;
    for (const start of [...component].sort()) {
      const chain = shortestCycle(graph, start, members);
      if (!chain) continue;
      const files = chain.map((e) => e.from);
      const first = files.indexOf([...files].sort()[0]);
      const rotated = [...chain.slice(first), ...chain.slice(0, first)];
      const key = rotated.map((e) => `${e.from}:${e.line}`).join(" ");
      if (!found.has(key)) found.set(key, rotated);
    }
  }
  return [...found.values()];
}

/** The folder of a file under root ("." for a file directly in root) and its name within it. */
function placeOf(root, file) {
  const parts = path.relative(root, file).split(path.sep);
  return parts.length === 1
    ? { folder: ".", name: parts[0] }
    : { folder: parts[0], name: parts.slice(1).join("/") };
}

/** Why an import breaks the folder table, or null when it is allowed. */
function directionError(root, edge) {
  const a = placeOf(root, edge.from);
  const b = placeOf(root, edge.to);
  if (a.folder === b.folder) return null;
  for (const folder of [a.folder, b.folder]) {
    if (!(folder in IMPORTERS))
      return `folder ${folder}/ is not in the import table of scripts/check-imports.js`;
  }
  const importers = IMPORTERS[b.folder];
  if (importers === ANY) return null;
  const allowed = importers[a.folder];
  if (allowed === ANY || (Array.isArray(allowed) && allowed.includes(b.name))) return null;
  const who = Object.entries(importers).map(([f, files]) =>
    files === ANY ? f : `${f} (${files.join(", ")} only)`,
  );
  return `${a.folder}/ may not import ${b.folder}/${b.name} (${b.folder}/ is imported by ${who.join(", ") || "nothing in src/"})`;
}

/** The folder table as markdown: one row per folder, who may import it, and why where noted. */
export function importTable() {
  const name = (f) => (f === "." ? "`index.ts`" : f);
  const rows = Object.entries(IMPORTERS).map(([folder, importers]) => {
    let who;
    if (importers === ANY) who = "everyone";
    else {
      const whole = Object.keys(importers).filter((f) => importers[f] === ANY);
      const parts = Object.entries(importers)
        .filter(([, files]) => files !== ANY)
        .map(([f, files]) => `${name(f)} (${files.map((x) => `\`${x}\``).join(", ")} only)`);
      who = [whole.map(name).join(", "), ...parts].filter(Boolean).join("; ") || "nothing in src/";
    }
    const note = NOTES[folder] ? `: ${NOTES[folder]}` : "";
    return `| ${folder === "." ? "`index.ts`" : `${folder}/`} | ${who}${note} |`;
  });
  return ["| folder | may be imported by |", "| --- | --- |", ...rows].join("\n") + "\n";
}

const BEGIN = "<!-- import table: generated by `node scripts/check-imports.js --write-table` -->";
const END = "<!-- end of the import table -->";

/** `text` (ARCHITECTURE.md) with its generated block replaced by `table`; null without one. */
export function withTable(text, table) {
  const a = text.indexOf(BEGIN);
  const b = text.indexOf(END);
  if (a < 0 || b < a) return null;
  return `${text.slice(0, a)}${BEGIN}\n${table}${text.slice(b)}`;
}

function writeTable(file) {
  const next = withTable(fs.readFileSync(file, "utf8"), importTable());
  if (next === null) {
    console.error(`${file}: no import table block (${BEGIN} ... ${END})`);
    return 1;
  }
  fs.writeFileSync(file, next);
  console.log(`${path.relative(process.cwd(), file)}: import table written`);
  return 0;
}

function main(argv) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  if (argv.length === 1 && argv[0] === "--table") {
    process.stdout.write(importTable());
    return 0;
  }
  if (argv.length === 1 && argv[0] === "--write-table")
    return writeTable(path.join(here, "..", "ARCHITECTURE.md"));
  const root = path.resolve(argv[0] ?? path.join(here, "..", "src"));
  if (argv.length > 1 || !fs.existsSync(root) || !fs.statSync(root).isDirectory()) {
    console.error(
      "usage: node scripts/check-imports.js [ROOT]  (ROOT: a directory of .ts sources)\n" +
        "       node scripts/check-imports.js --table | --write-table  (ARCHITECTURE.md's import table)",
    );
    return 2;
  }
  const rel = (f) => path.relative(root, f).split(path.sep).join("/");
  const cwdRel = path.relative(process.cwd(), root);
  const show = (f) => (cwdRel.startsWith("..") ? rel(f) : path.relative(process.cwd(), f));

  const files = sourceFiles(root);
  const known = new Set(files);
  const graph = new Map(files.map((f) => [f, []]));
  const allowUsed = new Set();
  let count = 0;
  for (const file of files) {
    for (const { specifier, line, kind } of importsOf(file)) {
      const to = resolve(file, specifier, known);
      if (!to) continue;
      count++;
      const pair = `${rel(file)} -> ${rel(to)}`;
      if (ALLOW.includes(pair)) {
        allowUsed.add(pair);
        continue;
      }
      graph.get(file).push({ from: file, to, line, kind });
    }
  }

  for (const pair of ALLOW) {
    const note = allowUsed.has(pair) ? "allowed for now" : "matches no import: remove it";
    console.error(`warning: import ${pair}: ${note} (ALLOW in scripts/check-imports.js)`);
  }
  const label = (e) =>
    e.kind === "static" ? "" : ` (${e.kind === "type" ? "type-only" : "dynamic"} import)`;
  const found = cycles(graph);
  for (const chain of found) {
    const links = chain.map((e) => `${show(e.from)}:${e.line}${label(e)}`);
    console.error(`import cycle: ${[...links, show(chain[0].from)].join(" -> ")}`);
  }
  let forbidden = 0;
  for (const edges of graph.values()) {
    for (const edge of edges) {
      const why = directionError(root, edge);
      if (!why) continue;
      forbidden++;
      console.error(`${show(edge.from)}:${edge.line}: forbidden import${label(edge)}: ${why}`);
    }
  }
  const summary = `check-imports: ${files.length} files, ${count} imports`;
  if (found.length === 0 && forbidden === 0) {
    console.log(`${summary}: no cycles, every import follows the folder table`);
    return 0;
  }
  console.error(`${summary}: ${found.length} cycle(s), ${forbidden} forbidden import(s)`);
  return 1;
}

// Run as a script (not when a test imports importTable).
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url))
  process.exitCode = main(process.argv.slice(2));

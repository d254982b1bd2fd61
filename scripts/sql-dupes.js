// Counts the SQL statements written twice: string literals in src/store/sqlite/ that appear word
// for word in src/store/postgres/ once placeholders (?, ?NNN, $N) and whitespace are normalised.
// Issue 38: the store's shared SQL lives once in src/store/queries/; test/sql-dupes.test.js keeps
// this count from growing back. `--list` prints the duplicates.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.join(HERE, "..", "src", "store");
const SQL_START = /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i;

/** The string literals of a TypeScript source that read as SQL, normalised. */
function statements(src) {
  const out = [];
  const re = /`((?:[^`\\]|\\.)*)`|"((?:[^"\\\n]|\\.)*)"/g;
  for (let m; (m = re.exec(src));) {
    const text = m[1] ?? m[2];
    if (SQL_START.test(text)) out.push(normalise(text));
  }
  return out;
}

function normalise(sql) {
  return sql
    .replace(/\$\d+(::\w+(\[\])?)?/g, "?")
    .replace(/\?\d+/g, "?")
    .replace(/\s+/g, " ")
    .replace(/\( /g, "(")
    .replace(/ \)/g, ")")
    .trim();
}

function folder(name) {
  const dir = path.join(ROOT, name);
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .flatMap((f) => statements(fs.readFileSync(path.join(dir, f), "utf8")));
}

function count() {
  const sqlite = folder("sqlite");
  const pg = new Set(folder("postgres"));
  const dupes = sqlite.filter((s) => pg.has(s));
  return { sqlite: sqlite.length, dupes };
}

export { count, normalise, statements };

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { sqlite, dupes } = count();
  if (process.argv.includes("--list")) for (const d of dupes) console.log(d + "\n");
  console.log(`${dupes.length} of SQLite's ${sqlite} statements appear word for word in postgres/`);
}

// The store's shared SQL (issue 38): a statement both engines run is written once, in this
// folder, with PostgreSQL's numbered placeholders ($1, $2, ...). The SQLite connection turns them
// into `?` when it prepares the statement (Conn.q, once per connection and text), so its callers
// bind positionally as ever. better-sqlite3 takes SQLite's `?NNN` and `$NNN` only as named
// parameters (an object to bind), so the text must number its placeholders in order, each once:
// `sqlitePlaceholders` throws otherwise, at the statement's first use. What the dialects write
// differently stays in each engine (../sqlite/, ../postgres/), or is a word of `Dialect` here.
// An engine's table-group module imports its group's statements as `S` (S.MARKERS: shared).

/** The SQLite text of a statement written with $1..$n in order, each once; any other as it is. */
export function sqlitePlaceholders(sql: string): string {
  let next = 1;
  return sql.replace(/\$(\d+)/g, (_m, n: string) => {
    if (Number(n) !== next) throw new Error(`shared SQL: $${n} where $${next} was due: ${sql}`);
    next++;
    return "?";
  });
}

/** The engines' words for the same thing, where only a word differs. */
export interface Dialect {
  /** The larger of two values: SQLite's two-argument MAX, PostgreSQL's GREATEST. */
  greatest: "MAX" | "GREATEST";
  /** After a text column, to order it by bytes: SQLite's default (BINARY), PostgreSQL's "C". */
  bytewise: "" | ' COLLATE "C"';
  /** The daemon row's key: SQLite's store has one row (id 1), PostgreSQL's one per node. */
  daemonKey: "id" | "node";
  /**
   * After a read a write acts on: PostgreSQL locks the rows read until the transaction ends;
   * SQLite's write transaction (BEGIN IMMEDIATE) holds the whole store already.
   */
  forUpdate: "" | " FOR UPDATE";
}

export const SQLITE: Dialect = { greatest: "MAX", bytewise: "", daemonKey: "id", forUpdate: "" };
export const POSTGRES: Dialect = {
  greatest: "GREATEST",
  bytewise: ' COLLATE "C"',
  daemonKey: "node",
  forUpdate: " FOR UPDATE",
};

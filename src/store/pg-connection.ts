// The PostgreSQL store's connection: a pg.Pool, one client per transaction, and its numbered
// migrations (migrations/postgresql/NNN_*.sql, the same numbers and meaning as SQLite's).
//
// The transaction rule, as for SQLite: `PgConn.write` and `PgConn.read` are called only by a whole
// store operation (a PgStore method); the table-group functions in ./postgres/ take a `Q` and run
// in their caller's transaction, never opening one. A write runs at READ COMMITTED and makes its
// checks safe under concurrency with row locks taken first (the job row FOR UPDATE, see
// postgres/lock.ts) and unique keys with ON CONFLICT; a read that must see one snapshot runs at
// REPEATABLE READ. No row is written by every transaction (no global counter: its row lock, held
// until the commit is on disk, would make the writers of all nodes commit one at a time); a
// transaction that wins nothing writes nothing, and so is no fsync'd commit. Readers that follow
// new rows by id find which ids are final by the snapshot (postgres/horizon.ts).
import os from "node:os";
import pg from "pg";
import { StoreError } from "./errors.js";
import { migrationFilesIn, migrationText } from "./migrate.js";

const DIR = new URL("./migrations/postgresql/", import.meta.url);
/** The number of the newest migration: the same as SQLite's LATEST (one numbering). */
export const PG_LATEST = 16;
/** The advisory lock key that serialises two processes migrating one database. */
const MIGRATE_LOCK = 0x63767372; // "cvsr"

/** A query runner: a transaction's client or (one statement) the pool. */
export interface Q {
  all<T>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  get<T>(sql: string, params?: readonly unknown[]): Promise<T | undefined>;
  /** Rows changed. */
  run(sql: string, params?: readonly unknown[]): Promise<number>;
  /**
   * The next statement is this transaction's last: its COMMIT is sent right behind it, without
   * waiting for its answer (one round trip for both). So the caller must decide nothing on that
   * answer: what the statement does is final, and no statement may follow it. If the statement
   * fails, the COMMIT finds the transaction aborted and rolls it back. Outside a transaction:
   * nothing.
   */
  last(): void;
  /**
   * Send the statement without waiting for the answers of those sent before it (the pool's
   * clients pipeline): a batch of them is one round trip. For statements whose answers decide
   * nothing about what is sent next.
   */
  send<T>(sql: string, params?: readonly unknown[]): Promise<T[]>;
}

export interface PgOpenOptions {
  /** Bring an empty database's schema into being (writers); else an empty one is "missing". */
  create: boolean;
  /** Read only: no migration; a schema older than this cronvisor's is refused. */
  readonly?: boolean;
  /** Connections in the pool (default 4). */
  poolSize?: number;
  /** This process's node: what its runs and claims record (default: the host name). */
  node?: string;
  /** The password (from password_file); else pg reads PGPASSWORD or ~/.pgpass. */
  password?: string;
  /** Keep finished runs' log tails (default true); false: the store keeps none. */
  logTails?: boolean;
  /**
   * The longest a connect or a query may take (ms), so that a store that stops answering (a cut
   * network) fails a call in time instead of hanging it: a node must notice it cannot renew its
   * lease while there is time to stop its runs. Default 10 s.
   */
  timeoutMs?: number;
}

// BIGINT (int8) columns are epoch-ms times, ids and counts: read them as numbers (exact below
// 2^53), as SQLite gives them. Per pool, not pg.types, so nothing global changes.
const INT8 = 20;
const types = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8
      ? (v: string) => Number(v)
      : pg.types.getTypeParser(oid, format as "text")) as typeof pg.types.getTypeParser,
};

/** Named prepared statements: the same SQL is parsed once per connection. */
const names = new Map<string, string>();
function named(sql: string, params?: readonly unknown[]): pg.QueryConfig {
  let name = names.get(sql);
  if (name === undefined) names.set(sql, (name = `cv${names.size + 1}`));
  return { name, text: sql, values: params as unknown[] | undefined };
}

/** A transaction's state, as its statements see it. */
interface TxState {
  /** The BEGIN sent and not yet awaited: the first statement goes out behind it (see PgConn.tx). */
  began?: Promise<unknown>;
  /** Q.last was called: the next statement takes the COMMIT with it. */
  last?: boolean;
  /** The COMMIT sent behind the last statement, for PgConn.tx to await. */
  committed?: Promise<unknown>;
}

function runner(c: pg.Pool | pg.PoolClient, where?: string, tx?: TxState): Q {
  const query = async (sql: string, params?: readonly unknown[]) => {
    if (tx?.committed !== undefined) throw new Error("a statement after its transaction's last");
    const sent = c.query(named(sql, params));
    const began = tx?.began;
    if (tx !== undefined) tx.began = undefined;
    if (tx?.last !== undefined) {
      tx.committed = c.query("COMMIT");
      tx.committed.catch(() => {}); // awaited by PgConn.tx once the statement answered
      tx.last = undefined;
    }
    try {
      if (began !== undefined) {
        // Answered first. A BEGIN that failed means a lost connection, and this statement too.
        await began.catch((e: unknown) => {
          sent.catch(() => {});
          throw e;
        });
      }
      return await sent;
    } catch (e) {
      throw where === undefined ? e : pgFailure(where, e);
    }
  };
  return {
    all: async <T>(sql: string, params?: readonly unknown[]) =>
      (await query(sql, params)).rows as T[],
    get: async <T>(sql: string, params?: readonly unknown[]) =>
      (await query(sql, params)).rows[0] as T | undefined,
    run: async (sql: string, params?: readonly unknown[]) =>
      (await query(sql, params)).rowCount ?? 0,
    last: () => {
      if (tx !== undefined) tx.last = true;
    },
    send: <T>(sql: string, params?: readonly unknown[]) => {
      const p = query(sql, params).then((r) => r.rows as T[]);
      p.catch(() => {}); // the caller awaits it; a failure aborts the transaction anyway
      return p;
    },
  };
}

/**
 * The StoreError an error of pg means, naming the store (never its password): a lost or refused
 * connection or a timeout is `io`, a deadlock or serialization failure `busy` (try again). So the
 * CLI prints one line, and the daemon keeps the write for its next beat, as with SQLite.
 */
export function pgFailure(where: string, e: unknown): Error {
  if (e instanceof StoreError || !(e instanceof Error)) return e as Error;
  const code = (e as { code?: unknown }).code;
  if (code === "40P01" || code === "40001" || code === "55P03")
    return new StoreError(`state store ${where} was busy (${e.message}); try again`, "busy");
  return new StoreError(`cannot use state store ${where}: ${e.message}`, "io");
}

export class PgConn {
  private closed = false;
  /** One statement outside any explicit transaction (it is its own). */
  readonly one: Q;

  private beatPool: pg.Pool | null = null;
  readonly pool: pg.Pool;

  constructor(
    private readonly newPool: (max: number) => pg.Pool,
    poolSize: number,
    readonly node: string,
    /** The store for messages: its URL without a password. */
    readonly where: string,
  ) {
    this.pool = newPool(poolSize);
    this.one = runner(this.pool, where);
  }

  get open(): boolean {
    return !this.closed;
  }

  /** fn as one write transaction on one client; COMMIT, or ROLLBACK on any error. */
  write<T>(fn: (q: Q) => Promise<T>, opts: { unsynced?: boolean } = {}): Promise<T> {
    return this.tx("BEGIN", fn, opts.unsynced ?? false);
  }

  /**
   * fn as one write transaction on a connection of its own: the lease's renewal, which must not
   * wait behind a tick's writes for a pooled connection (a node that renews late is taken over).
   * Not fsync'd: a renewal lost in a crash only makes the lease look older, which is the safe way
   * to be wrong.
   */
  beat<T>(fn: (q: Q) => Promise<T>): Promise<T> {
    this.beatPool ??= this.newPool(1);
    return this.tx("BEGIN", fn, true, this.beatPool);
  }

  /** fn with every read in it seeing one snapshot. */
  read<T>(fn: (q: Q) => Promise<T>): Promise<T> {
    return this.tx("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", fn, false);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([this.pool.end(), this.beatPool?.end()]);
  }

  private async tx<T>(
    begin: string,
    fn: (q: Q) => Promise<T>,
    unsynced: boolean,
    pool: pg.Pool = this.pool,
  ): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (e) {
      throw pgFailure(this.where, e);
    }
    let broken = false;
    try {
      // Statements without parameters go together, each pair one round trip (the simple query
      // protocol runs them in order, and stops at the first that fails). Not fsync'd, like
      // SQLite's writeUnsynced: for this transaction only. Not awaited here: the pool's clients
      // pipeline, so the transaction's first statement is sent behind it without waiting for its
      // answer, and the two are one round trip (the statement awaits it: runner).
      const began = client.query(unsynced ? `${begin}; SET LOCAL synchronous_commit = off` : begin);
      began.catch(() => {}); // awaited by the first statement, or below
      const tx: TxState = { began };
      const out = await fn(runner(client, undefined, tx));
      await began;
      // Or sent already, behind the last statement (Q.last). A transaction that wrote nothing
      // (no xid) commits without a WAL record: no fsync.
      await (tx.committed ?? client.query("COMMIT"));
      return out;
    } catch (e) {
      try {
        await client.query("ROLLBACK");
      } catch {
        broken = true; // the connection is gone: the pool must not hand it out again
      }
      throw pgFailure(this.where, e);
    } finally {
      client.release(broken);
    }
  }
}

/** The PostgreSQL migration files in order (the same numbering as SQLite's). */
export const pgMigrationFiles = (): string[] => migrationFilesIn(DIR);

/** Where the store is, for messages: never the password. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    u.password = "";
    return `${u.protocol}//${u.username ? `${u.username}@` : ""}${u.host}${u.pathname}`;
  } catch {
    return "the PostgreSQL store";
  }
}

/** Open a pool on `url`, check the schema and bring it forward (not for a reader). */
export async function openPgConn(url: string, opts: PgOpenOptions): Promise<PgConn> {
  const timeout = opts.timeoutMs ?? 10_000;
  const newPool = (max: number) => {
    const pool = new pg.Pool({
      connectionString: url,
      max,
      types,
      ...(opts.password !== undefined ? { password: opts.password } : {}),
      connectionTimeoutMillis: timeout,
      query_timeout: timeout,
      // A silent peer (a cut network) shows as a dead socket instead of a query waiting forever.
      keepAlive: true,
      // A query is sent without waiting for the answer to the one before (each still its own
      // Sync, answered in order): a transaction's BEGIN travels with its first statement. The
      // store never sends a statement that depends on an answer before it has that answer.
      pipeline: true,
      application_name: "cronvisor",
    });
    // An idle client's error (the server restarted) must not crash the process; the next query
    // on a fresh client reports it. A client checked out between two queries of a transaction
    // emits its own 'error' (the pool only listens while it is idle): without a listener that is
    // an uncaught exception; the transaction's next query fails and rolls back instead.
    pool.on("error", () => {});
    pool.on("connect", (client) => client.on("error", () => {}));
    return pool;
  };
  const conn = new PgConn(
    newPool,
    opts.poolSize ?? 4,
    opts.node ?? os.hostname(),
    describeUrl(url),
  );
  try {
    await migrate(conn, opts, describeUrl(url));
  } catch (e) {
    await conn.close();
    if (e instanceof StoreError) throw e;
    const msg = (e as Error).message;
    throw new StoreError(`cannot open state store ${describeUrl(url)}: ${msg}`, "io");
  }
  return conn;
}

async function schemaVersion(q: Q): Promise<number | null> {
  const has = await q.get<{ t: string | null }>("SELECT to_regclass('schema_version')::text AS t");
  if (!has?.t) return null;
  const r = await q.get<{ version: number }>("SELECT version FROM schema_version WHERE id = 1");
  return r?.version ?? 0;
}

function newer(where: string, version: number, known: number): StoreError {
  return new StoreError(
    `state store ${where}: schema version ${version} is newer than this cronvisor knows (${known}); upgrade cronvisor`,
    "corrupt",
  );
}

async function migrate(conn: PgConn, opts: PgOpenOptions, where: string): Promise<void> {
  const version = await schemaVersion(conn.one);
  if (version === PG_LATEST) return;
  if (version === null && (!opts.create || opts.readonly))
    throw new StoreError(
      `no state store in ${where} (has the daemon or a run ever started?)`,
      "missing",
    );
  const files = pgMigrationFiles();
  if (version !== null && version > files.length) throw newer(where, version, files.length);
  if (opts.readonly) {
    throw new StoreError(
      `state store ${where} is at schema version ${version}, older than this cronvisor's (${files.length}): start the daemon (or any writer) once to bring it forward`,
      "old",
    );
  }
  const client = await conn.pool.connect();
  try {
    await client.query("BEGIN");
    // Re-read under the lock: another process may have migrated meanwhile.
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATE_LOCK]);
    const q = runner(client);
    await q.run(`CREATE TABLE IF NOT EXISTS schema_version (
      id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)`);
    const v = (await schemaVersion(q)) ?? 0;
    if (v > files.length) throw newer(where, v, files.length);
    for (const f of files.slice(v)) await client.query(migrationText(DIR, f, "postgresql"));
    await q.run(
      `INSERT INTO schema_version (id, version) VALUES (1, $1)
       ON CONFLICT (id) DO UPDATE SET version = excluded.version`,
      [files.length],
    );
    await client.query("COMMIT");
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

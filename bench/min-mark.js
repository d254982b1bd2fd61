// The floor for `cronvisor mark KEY`: a Node process that opens the store the way any writer must
// (better-sqlite3, WAL, synchronous=FULL), inserts one marker row in one fsync'd commit, and exits.
// No fence check, no run counters, no argument parsing.
//
//   node bench/min-mark.js STATE_DIR JOB KEY
import path from "node:path";
import Database from "better-sqlite3";

const [stateDir, job, key] = process.argv.slice(2);
const db = new Database(path.join(stateDir, "cronvisor.db"), { fileMustExist: true });
db.pragma("journal_mode = WAL");
db.pragma("synchronous = FULL");
db.prepare(
  "INSERT INTO markers (job, key, run_id, fence, created_at) VALUES (?, ?, NULL, NULL, ?)",
).run(job, key, Date.now());
db.close();

// The daemon's and nodes' rows: SQLite has one daemon row, PostgreSQL a row per node with a
// lease, so only this statement is the same text (see sql.ts).

/** Each node's hash of each job it defines. */
export const JOB_HASHES = "SELECT node, job, hash FROM node_jobs ORDER BY job, node";

// The marker broker server's limits (broker-server.ts): what a connection, a run and a uid may
// hold of it, and for how long. Each uid has a socket of its own (broker.ts), so each uid's
// connections are counted apart: see docs/safety.md.
import { LINE_MAX } from "./broker-protocol.js";

/**
 * A connection with no complete request for this long is closed (the client reconnects): bytes
 * that do not end a request do not count, so a trickle cannot keep a connection.
 */
export const IDLE_MS = 30_000;
/**
 * A connection must authenticate with its first line (a request with a known secret) this soon
 * after connecting, whatever it sends meanwhile, and within AUTH_LINE_MAX bytes: a socket any
 * user can reach holds nothing for a client without a secret for longer.
 */
export const AUTH_MS = 2000;
export const AUTH_LINE_MAX = 8192;
/**
 * A first line longer than AUTH_LINE_MAX is taken only when it starts with a known secret, as
 * the client writes every request (a `mark` of many keys may be up to LINE_MAX).
 */
export const SECRET_FIRST = /^\{"secret":"([0-9a-f]{64})"/;
/** Requests a connection may have waiting: past this its lines are not parsed, nor read. */
export const MAX_PENDING = 16;
/**
 * A refused connection is half-closed after its reply; what still comes is read and dropped
 * (closing with unread data could reset the connection before the client reads the reply), for
 * this long and this many bytes at most.
 */
export const LINGER_MS = 1000;
export const LINGER_BYTES = 2 * LINE_MAX;
/**
 * Per uid (each uid has a socket of its own): past this many connections, a new one evicts the
 * oldest of that uid's that has not authenticated.
 */
export const MAX_CONNECTIONS = 384;
/** Per uid, the hard cap (file descriptors): connections past it are refused by the kernel side. */
export const HARD_MAX_CONNECTIONS = 512;
/**
 * Authenticated connections of one run, and of one uid: past them, a newly authenticated one
 * evicts the oldest idle one of the run (or of the uid), and is refused (69) if none is idle. So a
 * run, or a leftover while its run lives, holds a bounded share, and the others keep room.
 */
export const RUN_MAX_CONNECTIONS = 32;
export const UID_MAX_AUTHED = 256;
/** The listen queue of each uid's socket (the kernel caps it at net.core.somaxconn). */
export const BACKLOG = 1024;

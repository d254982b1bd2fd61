/**
 * The store cannot be used: absent, corrupt (empty, not SQLite, not cronvisor's, too new), at an
 * older schema that a read-only opener cannot bring forward, busy past its timeout, or unreadable.
 */
export class StoreError extends Error {
  constructor(
    message: string,
    readonly code: "missing" | "corrupt" | "old" | "busy" | "io",
  ) {
    super(message);
  }
}

/** The store cannot be used: absent, corrupt (or too new), busy past its timeout, or unreadable. */
export class StoreError extends Error {
  constructor(
    message: string,
    readonly code: "missing" | "corrupt" | "busy" | "io",
  ) {
    super(message);
  }
}

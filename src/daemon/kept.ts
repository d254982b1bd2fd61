// Store writes that a signal handler, hook or timer must not lose when the store is busy past its
// timeout (another writer holds it: a long `sqlite3` session, a backup): each is tried at once and,
// failing that, kept and tried again on every heartbeat until it lands. A later write of the same
// key replaces a kept one (the newest reload is the one that counts). Like run ends that the
// store refused (Runtime.unrecorded), nothing here ever throws out of the daemon's loop.
export class KeptWrites {
  private readonly pending = new Map<string, () => Promise<void>>();

  constructor(private readonly log: (line: string) => void) {}

  /** Write now if the store lets us, else keep it for the next beat. True when it landed. */
  async write(key: string, fn: () => Promise<void>): Promise<boolean> {
    this.pending.set(key, fn);
    return this.tryOne(key, fn);
  }

  /** Try every kept write again, oldest first. */
  async flush(): Promise<void> {
    for (const [key, fn] of [...this.pending]) await this.tryOne(key, fn);
  }

  get size(): number {
    return this.pending.size;
  }

  private async tryOne(key: string, fn: () => Promise<void>): Promise<boolean> {
    try {
      await fn();
    } catch (e) {
      this.log(`cronvisor: ${key}: ${(e as Error).message}; kept, tried again on the next beat`);
      return false;
    }
    // Only if no newer write of this key arrived while this one waited on the store.
    if (this.pending.get(key) === fn) this.pending.delete(key);
    return true;
  }
}

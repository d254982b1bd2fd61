// The configured HTTP endpoint over the daemon's life. It is optional monitoring, so a port that
// cannot be bound (taken by another program, an address not yet up) never stops the scheduler:
// the failure is logged once, kept, written to the store for `status`, and the bind is tried again
// on every heartbeat until it succeeds.
import { startHttp, type HttpEndpoint, type Routes } from "./http.js";
import type { Store } from "../store/store.js";

export class Endpoint {
  private server: HttpEndpoint | null = null;
  private down: { error: string; since: number } | null = null;
  /** The error this daemon last wrote to the store (undefined: nothing written yet). */
  private recorded: string | null | undefined = undefined;

  constructor(
    private readonly bind: { host: string; port: number },
    private readonly routes: Routes,
    private readonly log: (line: string) => void,
  ) {}

  get serving(): boolean {
    return this.server !== null;
  }

  /** Bind if not serving yet. True when it has just come up; a failure is kept, never thrown. */
  async ensure(now: number): Promise<boolean> {
    if (this.server) return false;
    try {
      this.server = await startHttp(this.bind, this.routes, this.log);
    } catch (e) {
      const error = (e as Error).message;
      if (this.down?.error !== error)
        this.log(`cronvisor: http: ${error} (the jobs run; retrying every heartbeat)`);
      this.down = { error, since: this.down?.since ?? now };
      return false;
    }
    this.down = null;
    const host = this.bind.host.includes(":") ? `[${this.bind.host}]` : this.bind.host;
    this.log(
      `cronvisor: http: serving /healthz /status /metrics on ${host}:${this.server.port}, and the status page at http://${host}:${this.server.port}/`,
    );
    return true;
  }

  /** Write the endpoint's state for `status` when it differs from what this daemon last wrote. */
  async record(store: Store, pid: number): Promise<void> {
    const error = this.down?.error ?? null;
    if (error === this.recorded) return;
    await store.setHttpState(pid, error, this.down?.since ?? null);
    this.recorded = error;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    await server?.close();
  }
}

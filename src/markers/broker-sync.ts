// The library's way to the marker broker (`Markers.fromEnv()` inside a run that has one): the
// same requests the CLI sends (broker-client.ts), made synchronous so that the library's calls
// stay as they are (`m.markDone(k)` returns once the marker is on disk). A worker thread owns the
// socket; the caller posts a request and blocks on a shared flag until the worker has posted the
// reply (Atomics.wait, then receiveMessageOnPort). The run's secret stays in this process.
import {
  MessageChannel,
  Worker,
  receiveMessageOnPort,
  type MessagePort,
} from "node:worker_threads";
import { EXIT } from "../core/exit.js";
import type { ClaimOutcome, MarkerWriter, Owner } from "../store/rows.js";
import { chunks } from "./broker-client.js";
import type { Reply } from "./broker-protocol.js";
import { BrokerCallError, FenceError, UsageError, type SyncMarkerPath } from "./target.js";

/** Longer than the client's own 60 s reply timeout, after which the worker answers 69. */
const WAIT_MS = 65_000;

type Ok = Extract<Reply, { ok: true }>;

export class BrokerPath implements SyncMarkerPath {
  private readonly worker: Worker;
  private readonly port: MessagePort;
  /** 0 while a request is out, 1 once its reply is posted. */
  private readonly flag = new Int32Array(new SharedArrayBuffer(4));

  constructor(socketPath: string, secret: string) {
    const { port1, port2 } = new MessageChannel();
    this.worker = new Worker(new URL("./broker-sync-worker.js", import.meta.url), {
      workerData: { socketPath, secret, port: port2, flag: this.flag },
      transferList: [port2],
    });
    this.worker.unref(); // a job that forgets close() still exits
    this.port = port1;
  }

  isDone(w: MarkerWriter, key: string): boolean {
    return this.call({ op: "check", job: w.job, key }).done === true;
  }

  markDone(w: MarkerWriter, keys: readonly string[]): number | null {
    let n = 0;
    for (const chunk of chunks(keys)) {
      const r = this.request({ op: "mark", job: w.job, keys: chunk });
      if (!r.ok && r.code === EXIT.unknown && n === 0) return null; // stale: nothing written
      n += ok(r).n ?? 0;
    }
    return n;
  }

  takeClaim(w: MarkerWriter, key: string, me: Owner): ClaimOutcome {
    const r = this.request({ op: "claim", job: w.job, key, pid: me.pid });
    if (!r.ok && r.code === EXIT.unknown) return { kind: "stale" };
    return ok(r).claim as ClaimOutcome;
  }

  completeClaim(w: MarkerWriter, key: string, pid: number): boolean {
    const r = this.request({ op: "complete", job: w.job, key, pid });
    if (!r.ok && r.code === EXIT.unknown) return false;
    ok(r);
    return true;
  }

  noteClaimCommand(job: string, key: string, pid: number, cmdPid: number): void {
    this.request({ op: "command", job, key, pid, cmd_pid: cmdPid }); // best effort
  }

  releaseClaim(job: string, key: string, pid: number): void {
    this.call({ op: "release", job, key, pid });
  }

  progress(w: MarkerWriter, message: string | null): boolean {
    const r = this.request({ op: "progress", job: w.job, message });
    if (!r.ok && r.code === EXIT.unknown) return false;
    ok(r);
    return true;
  }

  list(): never {
    throw new UsageError(
      "Markers#list() reads the store, which a run reaches only through its marker broker: list them with `cronvisor markers JOB` outside the run",
    );
  }

  close(): void {
    this.port.close();
    void this.worker.terminate();
  }

  private call(req: Record<string, unknown>): Ok {
    return ok(this.request(req));
  }

  /** One request, blocking until its reply (a refusal included). */
  private request(req: Record<string, unknown>): Reply {
    Atomics.store(this.flag, 0, 0);
    this.port.postMessage(req);
    Atomics.wait(this.flag, 0, 0, WAIT_MS);
    const got = receiveMessageOnPort(this.port);
    if (!got)
      throw new BrokerCallError(
        `no answer from the marker broker in ${WAIT_MS / 1000} s`,
        EXIT.unavailable,
      );
    return got.message as Reply;
  }
}

/** The reply's fields, or the refusal as the error a library call throws. */
function ok(r: Reply): Ok {
  if (r.ok) return r;
  if (r.code === EXIT.unknown) throw new FenceError(r.error);
  throw new BrokerCallError(r.error, r.code);
}

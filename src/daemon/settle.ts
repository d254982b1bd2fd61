// The garbage a daemon goes idle with. Start-up and a reload leave behind what they built once:
// the parsed YAML document, the config's JSON for its cache and its packed record, the store's
// start-up reads. V8 collects its old generation when it fills, which an idle daemon's few
// allocations do not do for hours, so that garbage and the half-empty pages around it stay
// resident (5.6 MiB at 1,000 jobs: BENCHMARKS.md, "Issue 16: idle memory"). One full collection
// once the work is done returns it (20-60 ms, once per start or reload), and V8's memory reducer,
// which a full collection starts, shrinks the heap again about 8 s later: what the monitors'
// first judgement of every job left is collected then. A second collection at the first
// heartbeat was tried: it only moved the reducer's work 10 s later, into the idle time.
import v8 from "node:v8";
import vm from "node:vm";

/**
 * Collect all garbage now. Node exposes no collection without `--expose-gc`, so the flag is set
 * for one new context, whose `gc` is called, and set back: no other context gets a `gc` (node
 * started with `--expose-gc` has its own, used as it is).
 */
export function collectGarbage(): void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === "function") {
    exposed();
    exposed();
    return;
  }
  v8.setFlagsFromString("--expose-gc");
  try {
    const gc = vm.runInNewContext("gc") as () => void;
    // The first pass frees; the second compacts what the first left and releases the pages.
    gc();
    gc();
  } finally {
    v8.setFlagsFromString("--no-expose-gc");
  }
}

/** After the caller's current work and whatever it has queued synchronously (a cache write). */
export function collectGarbageSoon(): void {
  setImmediate(collectGarbage);
}

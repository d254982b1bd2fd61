// The garbage a daemon goes idle with. Start-up and a reload leave behind what they built once:
// the parsed YAML document, the config's JSON for its cache and its packed record, the store's
// start-up reads. V8 collects its old generation when it fills, which an idle daemon's few
// allocations do not do for hours, so that garbage and the half-empty pages around it stay
// resident (5.6 MiB at 1,000 jobs: BENCHMARKS.md, "Issue 16: idle memory"). One full collection
// once the work is done returns it (20-60 ms, once per start or reload), and V8's memory reducer,
// which a full collection starts, shrinks the heap again about 8 s later: what the monitors'
// first judgement of every job left is collected then. A second collection at the first
// heartbeat was tried: it only moved the reducer's work 10 s later, into the idle time.
//
// The reducer's collections are the largest piece of an idle daemon's CPU (BENCHMARKS.md, "Idle
// CPU: what a minute costs"): each is a whole incremental mark-compact of the heap, 5-20 ms and
// 30-70 ms under load with its helper threads, where a heartbeat costs about 1 ms. Its first one
// waits until V8 judges the allocation rate low, which under load can be 16 or 24 s after
// start-up instead of 8, well into the idle time; after it, the reducer always ran a second one
// that released nothing more (10.0 -> 10.0 MB committed at 1,000 jobs). So the collection here
// compacts every page, as the reducer's own does, and the reducer is told to stop after one.
import v8 from "node:v8";
import vm from "node:vm";

/**
 * Collect all garbage now. Node exposes no collection without `--expose-gc`, so the flag is set
 * for one new context, whose `gc` is called, and set back: no other context gets a `gc` (node
 * started with `--expose-gc` has its own, used as it is).
 */
export function collectGarbage(): void {
  // Read at every collection, so set for these two only: a busy daemon's collections compact as
  // V8 decides.
  v8.setFlagsFromString("--compact-on-every-full-gc");
  try {
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
  } finally {
    v8.setFlagsFromString("--no-compact-on-every-full-gc");
    // Read by the reducer whenever it decides (process-wide, and for later activations too: each
    // then costs one collection instead of two or three).
    v8.setFlagsFromString("--memory-reducer-single-gc");
  }
}

/** After the caller's current work and whatever it has queued synchronously (a cache write). */
export function collectGarbageSoon(): void {
  setImmediate(collectGarbage);
}

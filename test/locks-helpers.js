// What the named-lock and group tests (locks.test.js, locks-nodes.test.js) share.

/** The most runs of `jobs` whose lifetimes (reservation to recorded end) overlap at once. */
export function mostAtOnce(runs) {
  const edges = runs.flatMap((r) => [
    [r.started_at, 1],
    [r.finished_at ?? Infinity, -1],
  ]);
  // An end at the same instant as a start comes first: the lock was free for the start.
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (now += d));
  return most;
}

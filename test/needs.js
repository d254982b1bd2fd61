// One rule for tests that need a tool or a privilege the machine may lack (root, cgroup2,
// PostgreSQL, Chromium, faketime, croniter, sqlite3, a tmpfs, a second user...): on a
// developer's machine such a test skips, saying what is missing; under CI (`CI` set, as
// .ci/run does, which installs everything and runs as root) it fails instead, saying the same,
// so a test can never pass in CI by quietly not running.

/** True under CI: the CI variable set to anything but "", "0" or "false". */
export const CI = !["", "0", "false"].includes(process.env.CI ?? "");

/** The message of the failure under CI. */
function ciFailure(why) {
  return new Error(`CI is set and this test cannot run: ${why} (CI must provide it)`);
}

/**
 * node:test options for a test that needs something: `why` is what is missing (a string) or a
 * falsy value when nothing is. Without CI: `{ skip: why }`. Under CI the test fails with `why`
 * before its body runs (an already-aborted signal: node:test reports it and exits 1).
 * Use as `test(name, needs(why), fn)` or `{ ...needs(why), timeout }`.
 */
export function needs(why) {
  if (!why) return {};
  if (!CI) return { skip: String(why) };
  return { signal: AbortSignal.abort(ciFailure(why)) };
}

/**
 * The same, inside a running test, for what is only known there: true when the test was
 * skipped (return at once); under CI throws, failing the test with `why`.
 * Use as `if (needsNow(t, why)) return;`.
 */
export function needsNow(t, why) {
  if (!why) return false;
  if (CI) throw ciFailure(why);
  t.skip(String(why));
  return true;
}

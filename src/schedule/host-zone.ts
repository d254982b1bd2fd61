// The host's time zone, found the way glibc finds it and without Intl where the answer is UTC.
// Asking Intl (`Intl.DateTimeFormat().resolvedOptions().timeZone`) pages in ICU's formatting
// data, about 8 MiB an idle daemon would hold for ever just to learn that a UTC host is UTC
// (BENCHMARKS.md, "Issue 16: the host zone without ICU"). A zone that is not UTC still goes
// through Intl: its jobs' slots need it anyway, and so the name is Intl's canonical one, the same
// string Intl's own answer would be.
import fs from "node:fs";
import path from "node:path";

// The names tzdata gives the zone that is UTC at every instant, upper-cased (Intl reads a
// `timeZone` option case-insensitively). Intl canonicalizes each of them to "UTC"
// (test/schedule-zone.test.js checks the whole list against it).
const UTC_NAMES = new Set(
  ["UTC", "UCT", "GMT", "GMT0", "GMT+0", "GMT-0", "Universal", "Zulu", "Greenwich"].flatMap((n) => [
    n.toUpperCase(),
    `ETC/${n.toUpperCase()}`,
  ]),
);

/** Is `zone` a name of UTC (UTC, Etc/UTC, GMT, Zulu...)? Such a zone is computed without Intl. */
export function isUtcZone(zone: string): boolean {
  return UTC_NAMES.has(zone.toUpperCase());
}

/**
 * The zone a name (as TZ or a zoneinfo path gives it) stands for: "UTC" for a name of UTC, Intl's
 * canonical name for another zone, or null when Intl does not know the name.
 */
export function canonicalZone(name: string): string | null {
  if (isUtcZone(name)) return "UTC";
  try {
    return new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    return null;
  }
}

/** The zone name after `zoneinfo/` in a path (`/usr/share/zoneinfo/Europe/Berlin`), or null. */
function zoneinfoTail(p: string): string | null {
  const i = p.lastIndexOf("/zoneinfo/");
  return i < 0 ? null : withoutPrefix(p.slice(i + "/zoneinfo/".length));
}

// posix/ and right/ are tzdata's copies of every zone (right/ counts leap seconds, which Intl and
// the scheduler ignore): the zone is the same.
const withoutPrefix = (name: string): string => name.replace(/^(posix|right)\//, "");

/** Where a symlink points, as an absolute path, or null when `file` is not a symlink. */
function linkTarget(file: string): string | null {
  try {
    return path.resolve(path.dirname(file), fs.readlinkSync(file));
  } catch {
    return null;
  }
}

/**
 * How the host's zone is named, from the TZ variable's value (`tz`, undefined when unset) and the
 * files of the directory standing for /etc (`etc`): a zone name to look up, or null when only
 * Intl can say (an /etc/localtime that is a copied file and no /etc/timezone). Pure but for
 * reading `etc`, so that a test can hand it a temporary directory.
 *
 * - TZ wins when set: `:Area/City` and `Area/City` alike, `posix/` and `right/` dropped, a path
 *   into a zoneinfo directory (or a link to one) read as the zone it names, `localtime` or the
 *   path of /etc/localtime read as the files below; any other path names no zone. An empty TZ is
 *   UTC, as glibc has it.
 * - Else the zone /etc/localtime links to under a zoneinfo directory.
 * - Else, when /etc/localtime is a file of its own (a copy), the zone /etc/timezone names.
 * - Else, when there is no /etc/localtime at all, UTC: glibc's rule.
 */
export function hostZoneName(tz: string | undefined, etc: string): string | null {
  const localtime = path.join(etc, "localtime");
  if (tz !== undefined) {
    const t = tz.startsWith(":") ? tz.slice(1) : tz;
    if (t.trim() === "") return "UTC";
    // "localtime" is zoneinfo's link back to /etc/localtime (and ICU's word for "ignore TZ").
    if (!t.startsWith("/") && t !== "localtime") return withoutPrefix(t);
    const named = zoneinfoTail(t) ?? zoneinfoTail(linkTarget(t) ?? "");
    if (named !== null) return named;
    if (t !== "localtime" && path.resolve(t) !== path.resolve(localtime)) return t;
  }
  const target = linkTarget(localtime);
  if (target !== null) return zoneinfoTail(target);
  if (!fs.existsSync(localtime)) return "UTC";
  try {
    const named = fs.readFileSync(path.join(etc, "timezone"), "utf8").trim();
    return named === "" ? null : named;
  } catch {
    return null;
  }
}

/**
 * The host's zone: a name of UTC as "UTC" without Intl, another zone as Intl's canonical name.
 * A TZ that names no zone Intl knows (`Foo/Bar`, a POSIX rule like `CET-1CEST`) is UTC, as glibc
 * takes an unknown TZ to be; so is anything else no zone can be found for.
 */
export function hostZone(tz: string | undefined = process.env.TZ, etc = "/etc"): string {
  const name = hostZoneName(tz, etc);
  if (name !== null) return canonicalZone(name) ?? "UTC";
  // Node's own answer is undefined or "Etc/Unknown" where ICU finds nothing: neither is a zone.
  const own = Intl.DateTimeFormat().resolvedOptions().timeZone as string | undefined;
  return own === undefined || own === "Etc/Unknown" ? "UTC" : (canonicalZone(own) ?? "UTC");
}

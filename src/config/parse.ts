// jobs.yaml text -> Config, or every error with its line and column. Pure: no file is read here
// (load.ts does that), so the same text always gives the same result.
import { isMap, isScalar, LineCounter, parseDocument } from "yaml";
import type { Config, ConfigError } from "../core/types.js";
import { resolveConfig } from "./defaults.js";
import { KEYS } from "./keys.js";
import {
  BAD,
  describe,
  rangeOf,
  report,
  reportAt,
  sortErrors,
  type Ctx,
  type Raw,
} from "./nodes.js";
import { reportUnknownGroups } from "./groups.js";
import { rootUnknownKey } from "./suggest.js";
import { readMap } from "./walk.js";
import { checkLinks } from "./links.js";
import { reportYamlErrors } from "./yaml-errors.js";

export interface ParseResult {
  config: Config | null;
  errors: ConfigError[];
}

/**
 * Parse and validate jobs.yaml text. Pure but for one thing: a relative `file` is made
 * absolute against the working directory (it anchors state_dir, cwd and env_file).
 * Every error is returned, sorted by position; `config` is null if there is any.
 */
export function parseConfig(
  text: string,
  file: string,
  opts: { hostTimezone?: string } = {},
): ParseResult {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false });
  const yamlErrors = [...doc.errors, ...doc.warnings];
  const ctx: Ctx = {
    file,
    text,
    lineCounter,
    doc,
    errors: [],
    yamlAt: yamlErrors.map((e) => e.pos[0]),
    replaced: [],
  };

  let raw: Raw | typeof BAD = BAD;
  const root = doc.contents;
  if (root === null || (isScalar(root) && root.value === null)) {
    reportAt(ctx, 0, "(root)", "no jobs defined");
  } else if (!isMap(root)) {
    report(
      ctx,
      root,
      "(root)",
      `expected a map of settings with "jobs:", got ${describe(ctx, root)}`,
    );
  } else {
    raw = readMap(ctx, root, KEYS, "(root)", (key, value) => rootUnknownKey(key, value));
    if (raw !== BAD) reportUnknownGroups(ctx, root, raw);
    if (!root.has("jobs")) reportAt(ctx, rangeOf(root)[0], "(root)", "no jobs defined");
    if (raw !== BAD) checkLinks(ctx, raw);
    if (raw !== BAD && typeof raw.password_file === "string" && typeof raw.store !== "string") {
      const key = root.items.find((p) => isScalar(p.key) && p.key.value === "password_file");
      report(
        ctx,
        key?.key ?? root,
        "password_file",
        "set, but there is no `store:` to use it with",
      );
    }
  }
  reportYamlErrors(ctx, root, yamlErrors);

  const errors = sortErrors(ctx.errors);
  if (errors.length > 0 || raw === BAD) return { config: null, errors };
  return { config: resolveConfig(raw, file, opts.hostTimezone ?? "UTC"), errors };
}

// The config stage's entry: jobs.yaml -> Config, or every error with its line and column.
// It only re-exports; each part lives in its own module:
//   keys.ts        the key table (kind, default, doc of every key) behind the JSON Schema
//   parse.ts       parseConfig(text, file): pure; the YAML walk is walk.ts, scalars.ts, nodes.ts
//                  and yaml-errors.ts, "did you mean" is suggest.ts, defaults are defaults.ts
//   load.ts        loadConfig(path): reads the file, then parses it
//   config-cache.ts  the validated copy `status` reads instead of parsing
//   ../schedule/syntax.ts  schedule syntax (macros, croner's checks), shared with the scheduler
export {
  ENV_NAME_PATTERN,
  HOSTPORT_PATTERN,
  JOB_KEYS,
  JOB_NAME_PATTERN,
  KEYS,
  type KeyKind,
  type KeySpec,
} from "./keys.js";
export { loadConfig, loadConfigCacheable } from "./load.js";
export { parseConfig, type ParseResult } from "./parse.js";
export { CRON_OPTIONS } from "../schedule/cron-options.js";
export { MACROS, parseSchedule } from "../schedule/syntax.js";

// The entry the CLI (commands/cli.ts) and the tests import; the importer is in ./index.ts.
export { importCrontab } from "./index.js";
export type { ImportError, ImportOptions, ImportResult } from "./index.js";

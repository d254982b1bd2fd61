// The library API for Node/TypeScript jobs: `import { Markers } from "cronvisor"`.
export {
  Markers,
  FenceError,
  ClaimHeldError,
  UsageError,
  targetFromEnv,
  type MarkersTarget,
} from "./markers.js";
export type { Config, JobConfig, RunResult, RunStatus, Trigger } from "./types.js";

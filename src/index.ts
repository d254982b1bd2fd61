// The library API for Node/TypeScript jobs: `import { Markers } from "cronvisor"`.
export {
  Markers,
  FenceError,
  ClaimHeldError,
  UsageError,
  targetFromEnv,
  type MarkersTarget,
} from "./markers/markers.js";
export type { Config, JobConfig, RunResult, RunStatus, Trigger } from "./core/types.js";

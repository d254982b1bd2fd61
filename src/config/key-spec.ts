// What a key of jobs.yaml is (keys.ts has the table): its kind, default, doc and limits.
export type KeyKind =
  | "string"
  | "path"
  | "duration"
  | "size"
  | "percent"
  | "count"
  | "bool"
  | "enum"
  | "schedule"
  | "command"
  | "timezone"
  | "env"
  | "url"
  | "hostport"
  | "store"
  | "node"
  | "nodes"
  | "name"
  | "names"
  | "number"
  | "groups"
  | "alerts"
  | "section"
  | "defaults"
  | "jobs"
  | "jobrefs"
  | "blackouts"
  | "windows";

export interface KeySpec {
  kind: KeyKind;
  /** For humans: the schema's description. Says what a missing key means. */
  doc: string;
  /** The default as written in jobs.yaml. Absent: required, or derived (see doc). */
  default?: string | number | boolean | null | Record<string, never> | never[];
  required?: true;
  /** `null` (and `none` for a duration) switches the setting off. */
  nullable?: true;
  /** A duration or size of 0 makes no sense here. */
  positive?: true;
  /** Smallest allowed count. */
  min?: number;
  /** enum: the allowed words. */
  values?: readonly string[];
  /** section, alerts, defaults, jobs: the keys inside. */
  keys?: Readonly<Record<string, KeySpec>>;
}

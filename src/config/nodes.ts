// The walk's shared vocabulary: its context (the text, the line counter, the errors so far), the
// values it produces, and the helpers that turn a YAML node into a position, a path or words for
// an error message. Every error is reported here, with its file, line and column.
import {
  isAlias,
  isMap,
  isNode,
  isScalar,
  isSeq,
  type Document,
  type LineCounter,
  type Scalar,
} from "yaml";
import type { ConfigError } from "../core/types.js";

// The walk checks the YAML tree against the key table and produces plain values keyed by YAML
// name (durations in ms, sizes in bytes). Only keys that were present and valid are kept, so
// defaults can fill in later, layer by layer.
export type Raw = Record<string, unknown>;
/** A value that was wrong (and reported): not kept, and its parent is not valid either. */
export const BAD = Symbol("invalid");

export interface RawJob {
  name: string;
  line: number;
  raw: Raw;
}

export interface Ctx {
  file: string;
  text: string;
  lineCounter: LineCounter;
  doc: Document.Parsed;
  errors: ConfigError[];
  /** Where YAML itself found problems: our own error on a node there would only repeat it. */
  yamlAt: number[];
  /** Offset ranges whose YAML errors one clearer message of ours replaces. */
  replaced: Array<[number, number]>;
}

export function rangeOf(node: unknown): [number, number, number] {
  const r = isNode(node) ? node.range : undefined;
  return r ? [r[0], r[1], r[2]] : [0, 0, 0];
}

export function reportAt(ctx: Ctx, offset: number, where: string, message: string): void {
  const { line, col } = ctx.lineCounter.linePos(offset);
  ctx.errors.push({ file: ctx.file, line, col, path: where, message });
}

export function report(
  ctx: Ctx,
  node: unknown,
  where: string,
  message: string,
  replacesYaml = false,
) {
  const start = rangeOf(node)[0];
  if (replacesYaml) {
    const eol = ctx.text.indexOf("\n", start);
    ctx.replaced.push([start, eol < 0 ? ctx.text.length : eol]);
  } else if (nearYamlError(ctx, node)) {
    return;
  }
  reportAt(ctx, start, where, message);
}

/** YAML found a problem in this node or on its line: whatever we say about it would be noise. */
export function nearYamlError(ctx: Ctx, node: unknown): boolean {
  const [start, , end] = rangeOf(node);
  const line = ctx.lineCounter.linePos(start).line;
  return ctx.yamlAt.some(
    (at) => (at >= start && at <= end) || ctx.lineCounter.linePos(at).line === line,
  );
}

/** By position (a stable sort keeps same-place errors in the order found), each once. */
export function sortErrors(errors: ConfigError[]): ConfigError[] {
  const unique = new Map(errors.map((e) => [`${e.line}:${e.col}:${e.path}:${e.message}`, e]));
  return [...unique.values()].sort((a, b) => a.line - b.line || a.col - b.col);
}

export function join(parent: string, key: string): string {
  return parent === "(root)" ? key : `${parent}.${key}`;
}

/** A scalar as written: keeps `1.10` and `08` that a number would lose. */
export function sourceText(ctx: Ctx, node: Scalar): string {
  if (typeof node.value === "string") return node.value;
  const [start, end] = rangeOf(node);
  return ctx.text.slice(start, end);
}

/** What a node is, for "expected X, got Y". */
export function describe(ctx: Ctx, node: unknown): string {
  if (isMap(node)) return "a map";
  if (isSeq(node)) return "a list";
  if (isScalar(node)) {
    if (typeof node.value === "string") return JSON.stringify(node.value);
    return sourceText(ctx, node) || "nothing";
  }
  return "nothing";
}

export function isEmptyValue(node: unknown): boolean {
  if (!isNode(node)) return true;
  const [start, end] = rangeOf(node);
  return isScalar(node) && node.value === null && start === end;
}

/** Follow an alias. An alias with no anchor is almost always an unquoted value starting with `*`. */
export function deref(ctx: Ctx, node: unknown, where: string, what: string): unknown {
  if (!isAlias(node)) return node;
  const target = node.resolve(ctx.doc);
  if (target) return target;
  const start = rangeOf(node)[0];
  const eol = ctx.text.indexOf("\n", start);
  const written = ctx.text
    .slice(start, eol < 0 ? undefined : eol)
    .replace(/\s+#.*$/, "")
    .trim();
  const message = `${what} ${JSON.stringify(written)} must be quoted: YAML reads a leading * as an alias`;
  report(ctx, node, where, message, true);
  return BAD;
}

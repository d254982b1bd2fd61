// The YAML parser's own errors, in our words and at the key path where they sit.
import { isMap, isNode, isScalar, isSeq, type YAMLError } from "yaml";
import { join, rangeOf, reportAt, sourceText, type Ctx } from "./nodes.js";

/** Report each of YAML's errors, but those that one clearer message of ours already replaced. */
export function reportYamlErrors(ctx: Ctx, root: unknown, yamlErrors: YAMLError[]): void {
  for (const e of yamlErrors) {
    const at = e.pos[0];
    if (ctx.replaced.some(([from, to]) => at >= from && at <= to)) continue;
    const where = locate(ctx, root, at);
    const { node } = where;
    if (e.code === "MISSING_CHAR" && isScalar(node) && node.type?.startsWith("QUOTE_")) {
      // YAML notices at the end of the file; the quote that was never closed is the news.
      reportAt(ctx, rangeOf(node)[0], where.path, "this quote is never closed");
    } else {
      reportAt(ctx, at, where.path, yamlMessage(e, where.key));
    }
  }
}

interface Location {
  path: string;
  /** The deepest node around the offset. */
  node: unknown;
  /** Set when the offset is on a key (the path is then its map's). */
  key?: string;
}

/** Where a YAML error sits, as a key path. */
function locate(ctx: Ctx, node: unknown, at: number, where = "(root)"): Location {
  // YAML reports an unclosed quote or bracket at the very end: that belongs to the last node.
  const within = (start: number, end: number) =>
    at >= start && (at < end || (at === end && end === ctx.text.length));
  if (isMap(node)) {
    for (const pair of node.items) {
      if (!isScalar(pair.key)) continue;
      const [start, , keyEnd] = rangeOf(pair.key);
      const name = sourceText(ctx, pair.key);
      if (at >= start && at < keyEnd) return { path: where, node: pair.key, key: name };
      const end = isNode(pair.value) ? rangeOf(pair.value)[2] : keyEnd;
      if (within(start, end)) return locate(ctx, pair.value, at, join(where, name));
    }
  } else if (isSeq(node)) {
    for (const [i, item] of node.items.entries()) {
      const [start, , end] = rangeOf(item);
      if (within(start, end)) return locate(ctx, item, at, `${where}[${i}]`);
    }
  }
  return { path: where, node };
}

function yamlMessage(e: YAMLError, key: string | undefined): string {
  switch (e.code) {
    case "DUPLICATE_KEY":
      return key === undefined ? "duplicate key" : `duplicate key ${JSON.stringify(key)}`;
    case "TAB_AS_INDENT":
      return "tabs are not allowed as indentation; use spaces";
    case "BLOCK_AS_IMPLICIT_KEY":
      return 'a plain value cannot contain ": "; quote it';
    case "MULTIPLE_DOCS":
      return 'a config is one YAML document: remove the "---" line';
    default:
      return e.message.charAt(0).toLowerCase() + e.message.slice(1).replace(/\.$/, "");
  }
}

// Text a job or a user wrote (marker keys, progress messages, run reasons, job names, input quoted
// in an error) reaches an operator's terminal: a raw escape sequence there could clear the
// screen, retitle the window or hide a line. Every human (non-JSON) output passes such text
// through printable(); JSON needs nothing (JSON.stringify escapes control characters itself).

// C0 controls, DEL, C1 controls, and the Unicode line separators and bidi overrides that reorder
// or break what a terminal shows.
// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/gu;

/** `s` with every control character shown as an escape (`\x1b`, `\n`, `\u202e`), never raw. */
export function printable(s: string): string {
  return s.replace(UNPRINTABLE, (c) => {
    const code = c.codePointAt(0) as number;
    if (c === "\n") return "\\n";
    if (c === "\r") return "\\r";
    if (c === "\t") return "\\t";
    return code <= 0xff
      ? `\\x${code.toString(16).padStart(2, "0")}`
      : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

/** printable() for each line of a message of several lines: the line breaks stay. */
export const printableLines = (s: string): string => s.split("\n").map(printable).join("\n");

// The one plain-text table renderer (status, history, markers, next): columns padded to their
// widest cell, two spaces apart, the last column never padded (no trailing blanks). Every cell is
// printable() first: cells hold keys, names and reasons that jobs and users wrote.
import { printable } from "./printable.js";

export interface TableOptions {
  /** Put before every line. */
  indent?: string;
  /** Paint a cell after padding (escape codes have no width); `row` 0 is the header. */
  paint?: (cell: string, row: number, column: number) => string;
}

export function renderTable(
  rows: readonly (readonly string[])[],
  opts: TableOptions = {},
): string[] {
  rows = rows.map((r) => r.map(printable));
  const widths: number[] = [];
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  const paint = opts.paint ?? ((c: string) => c);
  return rows.map((r, n) => {
    const cells = r.map((c, i) => {
      const padding = i === r.length - 1 ? "" : " ".repeat((widths[i] ?? 0) - c.length);
      return paint(c, n, i) + padding;
    });
    return `${opts.indent ?? ""}${cells.join("  ")}`.trimEnd();
  });
}

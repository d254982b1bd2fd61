// The status page's HTML, by hand: escaping, the one layout every page shares, and the headers
// that go with it. Every name, reason, progress message, marker key and log line on these pages
// can come from a job (or from whoever can write a job's output on a shared host), so nothing
// reaches the HTML unescaped: `h` escapes every value it is given unless the value is markup
// this module made (`Markup`), and control characters are shown as escapes (`\x1b`), never raw.
// Behind that, each page's Content-Security-Policy allows only its own inline style and script
// (by hash) and fetches from its own origin: markup that slipped through still could not run.
import { createHash } from "node:crypto";
import { printable } from "../core/printable.js";
import { PAGE_CSS, PAGE_JS } from "./page-assets.js";
import type { HttpResponse } from "./http.js";

/** Markup made here: inserted as it is. Never build one from text that did not pass `esc`. */
export class Markup {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Any character `esc` changes: markup, or one that printable() shows as an escape. */
// eslint-disable-next-line no-control-regex
const SPECIAL = /[&<>"'\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;

/** Text for element content or a quoted attribute: control characters shown, `& < > " '` escaped. */
export function esc(text: string): string {
  // Most text (times, numbers, job names) has none: one scan, no new string.
  if (!SPECIAL.test(text)) return text;
  return printable(text).replace(/[&<>"']/g, (c) => ESCAPES[c] as string);
}

/** Several lines (a log): each line as `esc`, the line breaks kept. */
export function escLines(text: string): string {
  return text.split("\n").map(esc).join("\n");
}

type Value = Markup | string | number | boolean | null | undefined | readonly Value[];

function insert(v: Value): string {
  if (v === null || v === undefined || v === false) return "";
  if (v instanceof Markup) return v.text;
  if (Array.isArray(v)) return v.map(insert).join("");
  return esc(String(v));
}

/** A template whose every `${value}` is escaped, except Markup (and arrays of values, joined). */
export function h(strings: TemplateStringsArray, ...values: Value[]): Markup {
  let out = strings[0] ?? "";
  for (let i = 0; i < values.length; i++)
    out += insert(values[i] as Value) + (strings[i + 1] ?? "");
  return new Markup(out);
}

/** Markup made by hand from parts that are escaped already (or are constants). */
export const trusted = (text: string): Markup => new Markup(text);

const sha256 = (text: string): string =>
  `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`;

/**
 * Only this page's own style and script run; it loads nothing (no images, fonts, frames) and
 * talks only to its own origin (the live refresh); no other site may frame it.
 */
const CSP = [
  "default-src 'none'",
  `style-src ${sha256(PAGE_CSS)}`,
  `script-src ${sha256(PAGE_JS)}`,
  "connect-src 'self'",
  "img-src 'self' data:", // the empty icon: no request for /favicon.ico
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const HEADERS = {
  "Content-Security-Policy": CSP,
  "Referrer-Policy": "no-referrer",
  "X-Frame-Options": "DENY",
};

export interface PageParts {
  title: string;
  /** What goes in <main>. */
  body: Markup;
  /** Reload every N seconds without JavaScript (a followed log). */
  refreshS?: number;
  /** The script fetches the page's live parts again every N seconds. */
  live?: number;
  /** A followed log: the script keeps it scrolled to its end. */
  follow?: boolean;
  status?: number;
}

/** A whole page: the shared head (style, color schemes), skip link, <main> and the script. */
export function page(p: PageParts): HttpResponse {
  // Without the script only: with it, the live refresh does this without a reload.
  const refresh = p.refreshS
    ? h`<noscript><meta http-equiv="refresh" content="${p.refreshS}"></noscript>`
    : "";
  const live = p.live ? h` data-live="${p.live}"` : "";
  const follow = p.follow ? trusted(' data-follow="1"') : "";
  // The style and the script go in exactly as hashed for the Content-Security-Policy.
  const doc = h`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<link rel="icon" href="data:,">
${refresh}<title>${p.title}</title>
<style>${trusted(PAGE_CSS)}</style>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<main id="main"${live}${follow}>
${p.body}
</main>
<script>${trusted(PAGE_JS)}</script>
</body>
</html>
`;
  return {
    status: p.status ?? 200,
    contentType: "text/html; charset=utf-8",
    body: doc.text,
    headers: HEADERS,
  };
}

/** A page that says one thing (not found, a bad query, starting). */
export function notice(status: number, title: string, sentence: string): HttpResponse {
  return page({
    status,
    title: `cronvisor: ${title}`,
    body: h`<h1>${title}</h1>
      <p>${sentence}</p>
      <p><a href="/">Back to the status page</a></p>`,
  });
}

/** Intl formatters are slow to make (a page shows thousands of times): one per zone and form. */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(zone: string, seconds: boolean): Intl.DateTimeFormat {
  const key = `${zone} ${seconds}`;
  let f = formatters.get(key);
  if (!f) {
    f = new Intl.DateTimeFormat("en-CA", {
      timeZone: zone,
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
      ...(seconds ? { second: "2-digit" } : {}),
      hourCycle: "h23",
      timeZoneName: "short",
    });
    formatters.set(key, f);
  }
  return f;
}

/** Recent answers of localTime: 1,000 jobs share a few next fires (formatToParts is slow). */
const shown = new Map<string, string>();

/** `2026-03-29 02:00:00 CEST`: an instant in `zone` (en-CA writes ISO-like dates). */
export function localTime(t: number, zone: string, seconds = false): string {
  const key = `${t} ${zone} ${seconds}`;
  let text = shown.get(key);
  if (text === undefined) {
    if (shown.size >= 10_000) shown.clear();
    text = formatLocalTime(t, zone, seconds);
    shown.set(key, text);
  }
  return text;
}

function formatLocalTime(t: number, zone: string, seconds: boolean): string {
  let year = "",
    month = "",
    day = "",
    hour = "",
    minute = "",
    second = "",
    name = "";
  for (const x of formatter(zone, seconds).formatToParts(t)) {
    if (x.type === "year") year = x.value;
    else if (x.type === "month") month = x.value;
    else if (x.type === "day") day = x.value;
    else if (x.type === "hour") hour = x.value;
    else if (x.type === "minute") minute = x.value;
    else if (x.type === "second") second = x.value;
    else if (x.type === "timeZoneName") name = x.value;
  }
  return `${year}-${month}-${day} ${hour}:${minute}${seconds ? `:${second}` : ""} ${name}`;
}

/** A <time> element: the instant in `zone` for people, ISO UTC for machines (and tests). */
export function timeEl(iso: string | null, zone: string, seconds = false): Markup {
  if (iso === null) return h`never`;
  return h`<time datetime="${iso}">${localTime(Date.parse(iso), zone, seconds)}</time>`;
}

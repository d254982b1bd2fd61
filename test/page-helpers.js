// Shared by the status page's tests (page.test.js over plain HTTP, page-browser.test.js in
// Chromium): a daemon with the `http:` endpoint, and reading its HTML without a browser.
import fs from "node:fs";
import {
  cli,
  freePort,
  request,
  startDaemon,
  statusJson,
  waitFor,
  writeConfig,
} from "./helpers.js";

/** The text of HTML as a browser shows it: tags dropped, the five escapes undone. */
export function textOf(html) {
  return html
    .replace(/<[^>]*>/g, "")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

/** The inner HTML of every element `<tag ... class="cls"...>` (no nesting of the same tag). */
export function elements(html, tag, attr) {
  const re = new RegExp(`<${tag}\\b[^>]*${attr}[^>]*>([\\s\\S]*?)</${tag}>`, "g");
  return [...html.matchAll(re)].map((m) => m[1]);
}

/**
 * Write `lines` (YAML lines after `http:` and `heartbeat:`) as the config in `dir`, start the
 * daemon and wait until its page answers. Returns { cfg, port, d, get(path, opts) }.
 */
export async function pageDaemon(t, dir, lines, { port = null, env = {} } = {}) {
  port ??= await freePort();
  const cfg = writeConfig(
    dir,
    [`http: 127.0.0.1:${port}`, "heartbeat: 1s", ...lines, ""].join("\n"),
  );
  const d = startDaemon(t, cfg, env);
  const get = (path, opts = {}) => request(port, { path, ...opts });
  let last = null;
  await waitFor(
    async () => {
      if (d.exitCode !== null) throw new Error(`the daemon exited ${d.exitCode}`);
      last = await get("/").catch((e) => ({ status: e.message }));
      return last.status === 200;
    },
    `the page on port ${port}`,
    30_000,
  ).catch((e) => {
    throw new Error(
      `${e.message}; last answer ${last?.status} ${last?.body ?? ""}; daemon: ${d.err}`,
    );
  });
  return { cfg, port, d, get };
}

/** Rewrite the config (same `http:` line) and have the daemon reload it. */
export async function reloadWith(p, lines) {
  fs.writeFileSync(p.cfg, [`http: 127.0.0.1:${p.port}`, "heartbeat: 1s", ...lines, ""].join("\n"));
  const r = cli(["reload", "-c", p.cfg]);
  if (r.code !== 0) throw new Error(`reload: ${r.code} ${r.stderr}`);
}

/** Poll `status --json` until `pred(jobsByName)` holds; returns that map. */
export function statusUntil(cfg, pred, what, ms = 30_000) {
  return waitFor(
    () => {
      const jobs = new Map(statusJson(cfg).jobs.map((j) => [j.name, j]));
      return pred(jobs) ? jobs : null;
    },
    what,
    ms,
    100,
  );
}

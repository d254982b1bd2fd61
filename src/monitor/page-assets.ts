// The status page's one style sheet and one script, inlined into every page (no external assets;
// the Content-Security-Policy allows exactly these two by hash, see page-html.ts).
//
// The page works without the script: it is rendered whole on the server, the filter box is a GET
// form and a followed log reloads itself. The script only keeps it live: every part marked
// `data-live-part` is fetched again (same URL) every `data-live` seconds of <main>, never while
// the tab is hidden, never twice at once, and not while the keyboard focus is inside a part (a
// user moving through the bars is not pulled back to the top); and it filters the job list as
// the user types.

export const PAGE_CSS = `
:root {
  color-scheme: light dark;
  --bg: #ffffff; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --panel: #f6f8fa;
  --focus: #0969da; --link: #0550ae;
  --ok: #1a7f37; --failed: #cf222e; --timeout: #bc4c00; --killed: #8250df;
  --interrupted: #9a6700; --spawn_failed: #a40e26; --running: #0969da; --fenced: #1b7c83;
  --skipped: #9a6700; --missed: #cf222e; --warn-bg: #fff8c5; --bad-bg: #ffebe9; --ok-bg: #dafbe1;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #3d444d; --panel: #151b23;
    --focus: #4493f8; --link: #4493f8;
    --ok: #3fb950; --failed: #f85149; --timeout: #db6d28; --killed: #a371f7;
    --interrupted: #d29922; --spawn_failed: #ff7b72; --running: #58a6ff; --fenced: #39c5cf;
    --skipped: #d29922; --missed: #f85149; --warn-bg: #3b2e00; --bad-bg: #3c1618; --ok-bg: #12261e;
  }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 12px 16px 32px; }
a { color: var(--link); }
a:focus-visible, input:focus-visible, button:focus-visible { outline: 2px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -999px; top: 0; padding: 6px 10px; background: var(--bg); }
.skip:focus { left: 8px; z-index: 2; }
h1 { font-size: 20px; margin: 4px 0 8px; }
h2 { font-size: 15px; margin: 0; display: inline; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
.verdict { font-weight: 600; padding: 8px 12px; border-radius: 6px; margin: 8px 0; }
.v-0 { background: var(--ok-bg); } .v-1 { background: var(--warn-bg); } .v-2, .v-3 { background: var(--bad-bg); }
.daemon { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 8px 0 12px; }
.daemon dt, .facts dt { color: var(--muted); }
.daemon dd, .facts dd { margin: 0; }
.err { white-space: pre-wrap; color: var(--failed); }
.nodes { border-collapse: collapse; margin: 0 0 12px; font-size: 13px; }
.nodes caption { text-align: left; color: var(--muted); padding-bottom: 2px; }
.nodes th, .nodes td { text-align: left; padding: 1px 12px 1px 0; font-weight: normal; }
.nodes th[scope=col] { color: var(--muted); }
p.nodes { color: var(--muted); }
.holds { list-style: none; padding: 0; margin: 0 0 12px; font-size: 13px; }
.n-running { color: var(--ok); } .n-late { color: var(--timeout); } .n-gone { color: var(--failed); }
form.filter { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; padding: 8px 0;
  border-top: 1px solid var(--line); border-bottom: 1px solid var(--line); }
form.filter input[type=search] { font: inherit; padding: 4px 8px; min-width: 16em;
  background: var(--bg); color: var(--fg); border: 1px solid var(--line); border-radius: 4px; }
form.filter button { font: inherit; padding: 3px 10px; }
.range a[aria-current] { font-weight: 700; color: var(--fg); text-decoration: none; }
.count { color: var(--muted); margin: 6px 0; }
ol.jobs { list-style: none; padding: 0; margin: 0; }
ol.jobs > li { content-visibility: auto; contain-intrinsic-size: auto 110px; display: grid; grid-template-columns: minmax(260px, 34%) 1fr; gap: 4px 16px;
  padding: 8px 0; border-bottom: 1px solid var(--line); }
@media (max-width: 760px) { ol.jobs > li, .jobs-head { grid-template-columns: 1fr; } }
.health { display: inline-block; padding: 0 6px; border-radius: 10px; font-size: 12px; font-weight: 600;
  border: 1px solid currentColor; margin-left: 6px; }
.h-ok { color: var(--ok); } .h-failing, .h-stuck { color: var(--failed); }
.h-late, .h-repeating, .h-idle { color: var(--timeout); } .h-paused, .h-never-run, .h-unjudged { color: var(--muted); }
/* A date is read whole: never broken across lines. */
time, .health { white-space: nowrap; }
.problems { margin: 4px 0; padding-left: 18px; color: var(--failed); }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0 8px; margin: 4px 0 0; font-size: 13px; }
.sched { color: var(--muted); margin-left: 6px; }
.tl { display: block; width: 100%; height: 26px; border: 1px solid var(--line); border-radius: 3px;
  background: var(--panel) linear-gradient(to right, transparent calc(100% - 1px), var(--line) 0) 0 0 / 25% 100%; }
.tl-7d { background-size: calc(100% / 7) 100%; }
.axis { display: flex; justify-content: space-between; color: var(--muted); font-size: 11px; }
.jobs-head { position: sticky; top: 0; z-index: 1; background: var(--bg); display: grid;
  grid-template-columns: minmax(260px, 34%) 1fr; gap: 4px 16px; padding: 2px 0; border-bottom: 1px solid var(--line); }
.trendrow { display: flex; gap: 8px; align-items: center; font-size: 12px; color: var(--muted); margin-top: 4px; }
.trend { width: 160px; height: 24px; background: var(--panel); border: 1px solid var(--line); border-radius: 3px; }
.trend polyline { fill: none; stroke: var(--ok); stroke-width: 1.5; vector-effect: non-scaling-stroke; }
.trend circle { fill: var(--ok); }
.trend .p95 { stroke: var(--timeout); stroke-width: 1; stroke-dasharray: 3 2; vector-effect: non-scaling-stroke; }
.bar { stroke-width: 2; vector-effect: non-scaling-stroke; }
.s-ok { fill: var(--ok); stroke: var(--ok); } .s-failed { fill: var(--failed); stroke: var(--failed); }
.s-timeout { fill: var(--timeout); stroke: var(--timeout); } .s-killed { fill: var(--killed); stroke: var(--killed); }
.s-interrupted { fill: var(--interrupted); stroke: var(--interrupted); }
.s-spawn_failed { fill: var(--spawn_failed); stroke: var(--spawn_failed); }
.s-running { fill: var(--running); stroke: var(--running); } .s-fenced { fill: var(--fenced); stroke: var(--fenced); }
.s-skipped { fill: var(--skipped); } .s-missed { fill: var(--missed); }
.tick { opacity: 0.9; }
.pruned { fill: var(--line); opacity: 0.6; }
.tl a:focus { outline: none; }
.tl a:focus rect, .tl a:hover rect { stroke: var(--fg); stroke-width: 2; vector-effect: non-scaling-stroke; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 12px; font-size: 12px; color: var(--muted); margin: 6px 0; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
.legend .k-ok { background: var(--ok); } .legend .k-failed { background: var(--failed); }
.legend .k-timeout { background: var(--timeout); } .legend .k-killed { background: var(--killed); }
.legend .k-interrupted { background: var(--interrupted); } .legend .k-fenced { background: var(--fenced); } .legend .k-running { background: var(--running); }
.legend .k-skipped { background: var(--skipped); width: 3px; } .legend .k-missed { background: var(--missed); width: 3px; }
.run { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; }
.run dt { color: var(--muted); } .run dd { margin: 0; }
pre.log { background: var(--panel); border: 1px solid var(--line); padding: 8px; overflow: auto;
  max-height: 70vh; white-space: pre-wrap; word-break: break-all; }
.why p { margin: 4px 0; }
.why p:first-of-type { font-weight: 600; }
footer { color: var(--muted); font-size: 12px; margin-top: 16px; }
[hidden] { display: none !important; }
`;

export const PAGE_JS = `
(function () {
  "use strict";
  var main = document.getElementById("main");
  var every = Number(main && main.getAttribute("data-live")) || 0;
  var busy = false;
  var timer = null;
  var q = document.getElementById("q");
  var only = document.getElementById("problems");

  function filter() {
    if (!q) return;
    var text = q.value.trim().toLowerCase();
    var items = document.querySelectorAll("#jobs > li");
    var shown = 0;
    for (var i = 0; i < items.length; i++) {
      var li = items[i];
      var ok = li.getAttribute("data-name").indexOf(text) >= 0 &&
        (!only || !only.checked || li.getAttribute("data-problem") === "1");
      li.hidden = !ok;
      if (ok) shown++;
    }
    var count = document.getElementById("shown");
    if (count) count.textContent = String(shown);
  }

  function query() {
    var u = new URL(location.href);
    if (q) { if (q.value.trim()) u.searchParams.set("q", q.value.trim()); else u.searchParams.delete("q"); }
    if (only) { if (only.checked) u.searchParams.set("problems", "1"); else u.searchParams.delete("problems"); }
    u.searchParams.delete("page");
    return u;
  }

  function note(problem) {
    var s = document.getElementById("live");
    if (s && every > 0) s.textContent = problem || "Live: updated every " + every + " s.";
  }

  function later(ms) {
    clearTimeout(timer);
    if (every > 0) timer = setTimeout(refresh, ms);
  }

  function focusInside() {
    var a = document.activeElement;
    return !!(a && a !== document.body && a.closest && a.closest("[data-live-part]"));
  }

  function refresh() {
    if (busy) return;
    if (document.hidden || focusInside()) return later(every * 1000);
    busy = true;
    var log = document.getElementById("log");
    var atEnd = log && log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    fetch(location.href, { cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (r) {
        if (!r.ok) throw new Error(String(r.status));
        return r.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var parts = document.querySelectorAll("[data-live-part]");
        for (var i = 0; i < parts.length; i++) {
          var fresh = doc.getElementById(parts[i].id);
          if (fresh) parts[i].replaceWith(document.importNode(fresh, true));
        }
        if (doc.title) document.title = doc.title;
        var next = doc.getElementById("main");
        if (next && !next.getAttribute("data-live")) every = 0;
        filter();
        note("");
        var log2 = document.getElementById("log");
        if (log2 && atEnd) log2.scrollTop = log2.scrollHeight;
      })
      .catch(function () {
        note("the last live update failed; retrying");
      })
      .then(function () { busy = false; later(every * 1000); });
  }

  if (q) {
    var typing = null;
    var changed = function () {
      filter();
      history.replaceState(null, "", query());
      clearTimeout(typing);
      typing = setTimeout(refresh, 400);
    };
    q.addEventListener("input", changed);
    if (only) only.addEventListener("change", changed);
  }
  note("");
  var log0 = document.getElementById("log");
  if (log0 && main.getAttribute("data-follow")) log0.scrollTop = log0.scrollHeight;
  document.addEventListener("visibilitychange", function () { if (!document.hidden) later(0); });
  later(every * 1000);
})();
`;

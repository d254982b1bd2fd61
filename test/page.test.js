// The status page without a browser: the HTML the real daemon serves over plain HTTP (what a
// browser without JavaScript shows), its escaping of what jobs wrote (a log line, a progress
// message, a spawn failure naming a hostile path), the `http_logs` gate on /runs/ID, `why` the
// same as the CLI's, and the endpoint's rules (Host check, read-only) on the page's paths.
import assert from "node:assert/strict";
import { test } from "node:test";
import { esc, h, trusted } from "../dist/monitor/page-html.js";
import { routeFor, startHttp, text } from "../dist/monitor/http.js";
import { parseConfig } from "../dist/config/parse.js";
import { BIN, cli, freePort, request, statusJson, tmpdir, waitFor } from "./helpers.js";
import { elements, pageDaemon, reloadWith, statusUntil, textOf } from "./page-helpers.js";

test("esc and h: markup characters and control characters never reach the HTML raw", () => {
  assert.equal(
    esc(`<script>"it's"&\x1b[31m\u202e`),
    "&lt;script&gt;&quot;it&#39;s&quot;&amp;\\x1b[31m\\u202e",
  );
  const name = "<img src=x onerror=alert(1)>";
  assert.equal(
    h`<p title="${name}">${name} ${trusted("<b>ok</b>")} ${[1, "<", null, false]}</p>`.text,
    '<p title="&lt;img src=x onerror=alert(1)&gt;">&lt;img src=x onerror=alert(1)&gt; <b>ok</b> 1&lt;</p>',
  );
});

test("routes: exact paths, and prefixes for /runs/ID and /why/JOB", () => {
  const routes = { "/": 1, "/status": 2, "/runs/": 3, "/why/": 4 };
  assert.equal(routeFor(routes, "/"), 1);
  assert.equal(routeFor(routes, "/status"), 2);
  assert.equal(routeFor(routes, "/runs/12"), 3);
  assert.equal(routeFor(routes, "/why/a%20b"), 4);
  assert.equal(routeFor(routes, "/runs/"), 3); // its handler says there is no run ""
  assert.equal(routeFor(routes, "/statusx"), undefined);
  assert.equal(routeFor(routes, "/nope/x"), undefined);
});

test("an answer that takes longer to build than a silent connection may last still arrives", async (t) => {
  // A connection silent for 2 s is dropped; one whose request is being answered is not.
  const slow = () => new Promise((r) => setTimeout(() => r(text(200, "built\n")), 2600));
  const port = await freePort();
  const server = await startHttp({ host: "127.0.0.1", port }, { "/": slow }, () => {});
  t.after(() => server.close());
  const r = await request(port, { path: "/" });
  assert.deepEqual([r.status, r.body], [200, "built\n"]);
});

test("http_logs: false by default, true when set, and nothing but a boolean", () => {
  const base = ['jobs: { a: { schedule: "@daily", command: "true" } }'];
  const parse = (lines) => parseConfig([...lines, ...base].join("\n"), "/srv/jobs.yaml");
  assert.equal(parse([]).config.httpLogs, false);
  assert.equal(parse(["http_logs: true"]).config.httpLogs, true);
  assert.deepEqual(
    parse(["http_logs: yes"]).errors.map((e) => `${e.line}:${e.col}: ${e.path}`),
    ["1:12: http_logs"],
  );
});

test("the page's worker: a store it cannot open answers 503 with the reason, and the client closes it", async () => {
  const { PageClient } = await import("../dist/monitor/page-client.js");
  const logged = [];
  const client = new PageClient("/nonexistent/cvx-state", (l) => logged.push(l));
  const { config } = parseConfig(
    'jobs: { a: { schedule: "@daily", command: "true" } }',
    "/srv/jobs.yaml",
  );
  const r = await client.answer(config, { path: "/", query: new URLSearchParams() }, Date.now());
  assert.equal(r.status, 503);
  assert.match(Buffer.from(r.body).toString("utf8"), /cannot open the store/);
  await client.close();
  assert.deepEqual(logged, []);
});

const HOSTILE_LOG = `printf '%s\\n' '<script>alert(1)</script>' "it's \\"quoted\\"" "$(printf 'ctl\\033[31mred')"`;

function jobs(node, bin) {
  return [
    "jobs:",
    "  good:",
    '    schedule: "*/2 * * * * *"',
    "    command: echo fine",
    "  bad:",
    '    schedule: "*/2 * * * * *"',
    `    command: '"${node}" "${bin}" progress "<img src=x onerror=alert(2)>"; ${HOSTILE_LOG.replace(/'/g, "''")}; exit 3'`,
    "  hostile:",
    '    schedule: "*/2 * * * * *"',
    `    command: ["/nonexistent/<script>x\\"'"]`,
  ];
}

test("GET / and /runs/ID without JavaScript: every fact rendered on the server, hostile text escaped, logs only with http_logs", async (t) => {
  const dir = tmpdir(t);
  const lines = jobs(process.execPath, BIN);
  const p = await pageDaemon(t, dir, lines);
  const st = await statusUntil(
    p.cfg,
    (j) =>
      j.get("good").last_success_at &&
      j.get("bad").health === "failing" &&
      j.get("hostile").health === "failing",
    "good ok, bad and hostile failing",
  );
  // The first line of `status --check` is its verdict.
  const check = cli(["status", "--check", "-c", p.cfg]).stdout.split("\n")[0];
  const page = await waitFor(async () => {
    const r = await p.get("/");
    return textOf(elements(r.body, "p", 'class="verdict')[0] ?? "") === check ? r : null;
  }, `the page's verdict to read ${check}`);
  assert.equal(page.status, 200);
  assert.match(page.headers["content-type"], /^text\/html; charset=utf-8/);
  const csp = page.headers["content-security-policy"];
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'sha256-[A-Za-z0-9+/=]+'(;|$)/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
  const body = page.body;
  // The daemon on top: liveness and heartbeat age.
  assert.match(textOf(body), new RegExp(`daemon\\s+running, pid ${p.d.pid}`));
  assert.match(textOf(body), /heartbeat\s+\d+s ago \(every 1s\)/);
  // Each job: its health word, problems first.
  const order = [
    ...body.matchAll(/<li\s+id="job-([a-z]+)"\s+data-name="[a-z]+"\s+data-health="([a-z-]+)"/g),
  ];
  assert.deepEqual(
    order.map((m) => [m[1], m[2]]).sort(),
    [...st.values()].map((j) => [j.name, j.health]).sort(),
  );
  assert.equal(order.at(-1)[2], "ok", "the healthy job comes after the failing ones");
  // Timeline bars link to why, coloured by status.
  assert.match(
    body,
    /<a href="\/why\/bad\?at=\d{4}-\d\d-\d\dT[0-9:.]+Z"><title>run \d+: failed \(exit 3\)/,
  );
  assert.match(body, /class="bar s-failed"/);
  assert.match(body, /class="bar s-ok"/);
  // The hostile spawn failure's reason (a problem sentence and bar titles) is escaped.
  assert.match(body, /\/nonexistent\/&lt;script&gt;x&quot;&#39;/);
  assertNothingRaw(body);

  // The failing run's page: its facts, but neither command nor log (http_logs is off).
  const runId = st.get("bad").last_finished_run.run_id;
  const run = await p.get(`/runs/${runId}`);
  assert.equal(run.status, 200);
  const runText = textOf(run.body);
  for (const fact of ["trigger", "slot", "node", "exit code 3", "exit 3", "0 new, 0 already done"])
    assert.ok(runText.includes(fact), `run page shows ${fact}:\n${runText}`);
  assert.ok(runText.includes("<img src=x onerror=alert(2)>"), "the progress message, as text");
  assert.ok(runText.includes("http_logs: true"), "says how to show the log");
  assert.doesNotMatch(run.body, /printf|alert\(1\)|quoted/, "no command and no log line");
  assertNothingRaw(run.body);
  const hostileRun = await p.get(`/runs/${st.get("hostile").last_finished_run.run_id}`);
  assert.match(hostileRun.body, /spawn failed: ENOENT \/nonexistent\/&lt;script&gt;x&quot;&#39;/);
  assertNothingRaw(hostileRun.body);

  // With http_logs: true (a reload), the command and the log's end, escaped.
  await reloadWith(p, ["http_logs: true", ...lines]);
  const logged = await waitFor(async () => {
    const r = await p.get(`/runs/${runId}`);
    return r.body.includes('id="log"') ? r : null;
  }, "the run page with its log");
  assert.match(logged.body, /<pre class="log"><code>&quot;/, "the command");
  const log = textOf(elements(logged.body, "pre", 'id="log"')[0]);
  assert.match(log, /^<script>alert\(1\)<\/script>\nit's "quoted"\nctl\\x1b\[31mred\n$/);
  assertNothingRaw(logged.body);
  // Following a run that has ended: nothing to follow, no reload.
  const follow = await p.get(`/runs/${runId}?follow=1`);
  assert.doesNotMatch(follow.body, /data-live=|http-equiv="refresh"/);
});

/** The sentences of a why page, as text. */
const whySentences = (body) =>
  elements(elements(body, "section", 'class="why"')[0] ?? "", "p", "").map(textOf);

/** No markup from a job's text, and no raw control character, anywhere in a page. */
function assertNothingRaw(body) {
  assert.doesNotMatch(body, /<script>alert|<img src=x|<script>x/);
  // eslint-disable-next-line no-control-regex
  assert.doesNotMatch(body, /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/);
  // The one script on a page is the page's own.
  assert.equal(body.match(/<script>/g)?.length, 1);
}

test("GET /why/JOB says what `cronvisor why` says; bad paths and times are refused, escaped; the endpoint's rules hold", async (t) => {
  const dir = tmpdir(t);
  const p = await pageDaemon(t, dir, [
    "jobs:",
    "  slow:",
    '    schedule: "* * * * * *"',
    "    command: sleep 2.5",
  ]);
  const rows = await statusUntil(
    p.cfg,
    (j) => j.get("slow").last_finished_run,
    "a finished run of slow",
  );
  const slot = rows.get("slow").last_finished_run.slot;
  const cliWhy = cli(["why", "slow", "--at", slot, "-c", p.cfg]);
  assert.equal(cliWhy.code, 0, cliWhy.stderr);
  const why = await p.get(`/why/slow?at=${slot}`);
  assert.equal(why.status, 200);
  assert.deepEqual(whySentences(why.body), cliWhy.stdout.trim().split("\n"));
  assert.match(why.body, /<a href="\/runs\/\d+">Run \d+<\/a>/, "the run named links to its page");
  // A skipped slot (the lock was held) explains itself the same way.
  const history = JSON.parse(cli(["history", "slow", "--json", "-c", p.cfg]).stdout);
  const skipped = history.find((r) => r.status === "skipped");
  assert.ok(skipped, "a slot skipped by overlap");
  // (Its holder may end between the two reads, which changes a sentence: read until they agree.)
  await waitFor(async () => {
    const page = whySentences((await p.get(`/why/slow?at=${skipped.slot}`)).body);
    const cliText = cli(["why", "slow", "--at", skipped.slot, "-c", p.cfg]).stdout.trim();
    return JSON.stringify(page) === JSON.stringify(cliText.split("\n"));
  }, "the page's why of a skipped slot to read as the CLI's");

  const none = await p.get("/why/%3Cscript%3Ealert(1)%3C%2Fscript%3E");
  assert.equal(none.status, 404);
  assert.match(none.body, /no job named &quot;&lt;script&gt;alert\(1\)&lt;\/script&gt;&quot;/);
  const badTime = await p.get(`/why/slow?at=${encodeURIComponent('"><script>x')}`);
  assert.equal(badTime.status, 400);
  assert.match(badTime.body, /at=&quot;\\&quot;&gt;&lt;script&gt;x&quot; is not an ISO-8601 time/);
  assert.equal((await p.get("/runs/abc")).status, 404);
  assert.equal((await p.get("/runs/999999")).status, 404);
  assert.equal((await p.get("/nope")).status, 404);
  for (const path of ["/", "/runs/1", "/why/slow"]) {
    const foreign = await p.get(path, { host: `evil.example:${p.port}` });
    assert.equal(foreign.status, 403, `${path} with a foreign Host`);
    assert.equal((await p.get(path, { method: "POST" })).status, 405, `POST ${path}`);
  }
  // /status is still the JSON document of `status --json`.
  const json = JSON.parse((await p.get("/status")).body);
  assert.deepEqual(
    json.jobs.map((j) => j.name),
    statusJson(p.cfg).jobs.map((j) => j.name),
  );
});

test("the page's verdict: --check's first line while it is short; with many jobs, counted and cut to three names", async () => {
  const { pageVerdict, VERDICT_CHARS } = await import("../dist/monitor/page-verdict.js");
  const { checkSummary } = await import("../dist/health/status.js");
  const daemon = {
    state: "running",
    heartbeat_age_s: 1,
    config_error: null,
    http_error: null,
    config_accepted_at: null,
    config_file_errors: null,
  };
  const report = (jobs, over = {}) => ({
    daemon,
    nodes: [],
    shared: false,
    jobs: jobs.map(([name, health]) => ({ name, health, problems: [], definition_differs_on: [] })),
    ...over,
  });
  const { config } = parseConfig(
    'jobs: { a: { schedule: "@daily", command: "true" } }',
    "/srv/jobs.yaml",
  );
  const few = report([
    ["a", "failing"],
    ["b", "ok"],
    ["c", "late"],
  ]);
  assert.equal(pageVerdict(few, config), checkSummary(few, config));
  assert.equal(pageVerdict(few, config), "WARNING: a failing, c late");

  const many = Array.from({ length: 1000 }, (_, i) => [`job-${i}`, "failing"]);
  const failing = report(many, { daemon: { ...daemon, http_error: "EADDRINUSE" } });
  assert.ok(checkSummary(failing, config).length > 10_000, "--check names every job");
  assert.equal(
    pageVerdict(failing, config),
    "WARNING: 1000 jobs failing: job-0, job-1, job-2 and 997 more, http endpoint down (EADDRINUSE)",
  );
  const mixed = report(many.map(([n], i) => [n, i % 4 === 1 ? "late" : "failing"]));
  assert.equal(
    pageVerdict(mixed, config),
    "WARNING: 1000 jobs with problems (750 failing, 250 late): job-0 failing, job-1 late, job-2 failing and 997 more",
  );

  // A shared store where no running node may run the jobs: CRITICAL, counted the same way.
  const hosts = Array.from(
    { length: 1000 },
    (_, i) => `  j${i}: { schedule: "@daily", command: "true", hosts: [gone] }`,
  );
  const shared = parseConfig(["jobs:", ...hosts].join("\n"), "/srv/jobs.yaml").config;
  const node = { name: "n1", state: "running", clock_offset_ms: 0 };
  const critical = report(
    hosts.map((_, i) => [`j${i}`, "ok"]),
    { shared: true, nodes: [node] },
  );
  assert.match(checkSummary(critical, shared), /^CRITICAL: no running node may run j0, j1, /);
  assert.equal(
    pageVerdict(critical, shared),
    "CRITICAL: no running node may run 1000 jobs: j0, j1, j2 and 997 more",
  );
  // Whatever the names, the line stays short.
  const long = report(many.map(([n]) => [n.padEnd(300, "x"), "failing"]));
  assert.ok(pageVerdict(long, config).length <= VERDICT_CHARS, pageVerdict(long, config));
});

test("one node on SQLite: the page says so on top, the verdict of 12 failing jobs is short, a run's page names its node", async (t) => {
  const dir = tmpdir(t);
  const names = Array.from({ length: 12 }, (_, i) => `failing-job-${String(i).padStart(2, "0")}`);
  const p = await pageDaemon(t, dir, [
    "jobs:",
    ...names.map((n) => `  ${n}: { schedule: "* * * * * *", command: "exit 1" }`),
  ]);
  const st = await statusUntil(
    p.cfg,
    (j) => names.every((n) => j.get(n)?.health === "failing"),
    "every job failing",
  );
  const check = cli(["status", "--check", "-c", p.cfg]).stdout.split("\n")[0];
  assert.equal(check, `WARNING: ${names.map((n) => `${n} failing`).join(", ")}`);
  const page = await waitFor(async () => {
    const r = await p.get("/");
    return r.body.includes('id="nodes"') && /failing-job-02 and 9 more/.test(r.body) ? r : null;
  }, "the page with its nodes line and a short verdict");
  assert.equal(
    textOf(elements(page.body, "p", 'class="verdict')[0]),
    "WARNING: 12 jobs failing: failing-job-00, failing-job-01, failing-job-02 and 9 more",
  );
  const [node] = statusJson(p.cfg).nodes;
  const line = textOf(elements(page.body, "p", 'id="nodes"')[0]);
  assert.equal(
    line.replace(/\s+/g, " ").trim(),
    `store: SQLite, one node: ${node.name} (${node.state}, version ${node.version})`,
  );
  const runId = st.get("failing-job-00").last_finished_run.run_id;
  const run = textOf((await p.get(`/runs/${runId}`)).body);
  assert.match(run, new RegExp(`node\\s+${node.name.replace(/[.]/g, "\\.")}\\n`));
});

// The status page of a shared store (PostgreSQL, two real daemons): the nodes on top, each run's
// node on its bar and its page, a `fenced` run in its own colour with what it means, and `why`
// (CLI and page) of the fenced slot naming the node that took the job over. A node's row is
// written by whoever shares the store: one test row has a hostile name and version, which the
// page must show as text. The colours are checked in a real Chromium, light and dark.
/* global document, getComputedStyle -- in page.evaluate, run by the browser */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { launchChromium, chromiumMissing } from "./browser.js";
import { cli, freePort, request, startDaemon, tmpdir, waitFor, readPgStore } from "./helpers.js";
import { nodeConfig } from "./nodes-helpers.js";
import { elements, textOf } from "./page-helpers.js";
import { freshDatabase, pgMissing, rawClient } from "./pg.js";
import { needs } from "./needs.js";

// Needs a real PostgreSQL and Debian's chromium: skipped (with pgMissing's or browser.js's reason)
// only where one is not installed and CI is not set; .ci/run installs both, and in CI never.
const skip = pgMissing() || chromiumMissing;

let browser;
before(async () => {
  if (skip) return;
  browser = await launchChromium();
});
after(() => browser?.close());

const HOSTILE_NODE = `<img src=x onerror=alert(9)>"'`;
const HOSTILE_VERSION = `"><script>alert(8)</script>`;

const JOBS = `  long:
    schedule: "*/2 * * * * *"
    command: "sleep 60"
    kill_grace: 1s
  tick:
    schedule: "* * * * * *"
    command: "true"
`;

/** The colours of the page's statuses as the browser computes them, and the fenced bar's fill. */
async function coloursIn(ctx, url) {
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("dialog", (d) => errors.push(`a dialog: ${d.message()}`));
  await page.goto(url);
  const got = await page.evaluate(() => {
    const css = getComputedStyle(document.documentElement);
    const probe = document.createElement("div");
    document.body.append(probe);
    const rgb = (v) => (
      (probe.style.color = css.getPropertyValue(v)),
      getComputedStyle(probe).color
    );
    const statuses = [
      "ok",
      "failed",
      "timeout",
      "killed",
      "interrupted",
      "spawn_failed",
      "running",
    ];
    return {
      fenced: rgb("--fenced"),
      others: statuses.map(rgb),
      bar: getComputedStyle(document.querySelector("#job-long rect.s-fenced")).fill,
      key: getComputedStyle(document.querySelector(".legend .k-fenced")).backgroundColor,
      legend: document.querySelector(".legend").textContent,
      nodes: document.querySelector("#nodes").textContent,
    };
  });
  await page.close();
  return { ...got, errors };
}

test(
  "a shared store's page: its nodes on top (a hostile one escaped), each run's node, a fenced run in its own colour, and why of it naming the node that took over",
  needs(skip),
  async (t) => {
    const url = await freshDatabase();
    const raw = await rawClient(url, t);
    const dir = tmpdir(t);
    const port = await freePort();
    const c2 = nodeConfig(dir, "n2", url, JOBS);
    const c1 = nodeConfig(dir, "n1", url, JOBS, "3s", `http: 127.0.0.1:${port}\nhttp_logs: true`);
    // n2 alone first, so that it runs `long`; n1 (with the page) comes after and takes it over.
    const d2 = startDaemon(t, c2);
    const old = await waitFor(
      async () =>
        (await readPgStore(raw).runs({ job: "long", status: "running" })).find(
          (r) => r.pgid !== null,
        ),
      "n2 running long",
      30_000,
    );
    t.after(() => {
      try {
        process.kill(-old.pgid, "SIGKILL");
      } catch {
        // gone already
      }
    });
    assert.equal(old.node, "n2");
    const d1 = startDaemon(t, c1);
    const get = (path) => request(port, { path });
    await waitFor(
      async () => (await get("/").catch(() => ({}))).status === 200,
      "n1's page",
      30_000,
    );
    // A row some other party wrote into the shared store.
    const now = Date.now();
    await raw.query(
      "INSERT INTO daemon (node, pid, started_at, heartbeat_at, heartbeat_ms, lease_ms, renewed_at, version) VALUES ($1, 1, $2, $2, 1000, 3000, $2, $3)",
      [HOSTILE_NODE, now, HOSTILE_VERSION],
    );
    d2.kill("SIGKILL");
    await d2.exited;
    const next = await waitFor(
      async () =>
        (await readPgStore(raw).runs({ job: "long", status: "running", id: { gt: old.id } }))[0],
      "n1 taking long over",
      30_000,
    ).catch((e) => {
      throw new Error(`${e.message}\n${d1.err}`);
    });
    assert.equal(next.node, "n1");
    const [fenced] = await readPgStore(raw).runs({ id: old.id });
    assert.equal(fenced.status, "fenced");

    // The top of the page: every node, as `status --json` has them, the hostile one as text.
    const check = cli(["status", "--check", "-c", c1]).stdout.split("\n")[0];
    const page = await waitFor(async () => {
      const r = await get("/");
      const verdict = textOf(elements(r.body, "p", 'class="verdict')[0] ?? "");
      return verdict === check && /n2[^<]*<\/th>\s*<td[^>]*>gone/.test(r.body) ? r : null;
    }, `the page's verdict to read ${check}, n2 gone`);
    assert.match(check, /^WARNING: .*node n2 gone/);
    const nodes = elements(page.body, "table", 'id="nodes"')[0];
    assert.ok(nodes, "a table of nodes on top");
    const st = JSON.parse(cli(["status", "--json", "-c", c1]).stdout);
    assert.deepEqual(
      [...nodes.matchAll(/<th scope="row">([^<]*)<\/th>\s*<td[^>]*>([a-z]+)/g)]
        .map((m) => [textOf(m[1]), m[2]])
        .sort(),
      st.nodes.map((n) => [n.name, n.state]).sort(),
    );
    // Every run names its node: status --json's last runs, the page, text status and history.
    const tick = st.jobs.find((j) => j.name === "tick");
    assert.match(String(tick.last_finished_run?.node), /^n[12]$/, "last_finished_run.node");
    assert.match(String(tick.last_run?.node), /^n[12]$/, "last_run.node");
    assert.doesNotMatch(textOf(page.body), /undefined/);
    assert.match(textOf(page.body), /last run\s*run \d+ on node n[12] ok/);
    assert.match(cli(["status", "-c", c1]).stdout, /\btick\s+ok on n[12] \d/);
    const tickStatus = cli(["status", "tick", "-c", c1]).stdout;
    assert.match(tickStatus, /RUN\s+STATUS\s+TRIGGER\s+NODE\b/);
    assert.match(tickStatus, /^\s+\d+\s+ok\s+schedule\s+n[12]\s/m);
    const hist = cli(["history", "long", "-c", c1]).stdout;
    assert.match(hist, new RegExp(`^${old.id}\\s+long\\s+fenced\\s+schedule\\s+n2\\s`, "m"), hist);
    const nodesText = textOf(nodes);
    assert.ok(nodesText.includes(HOSTILE_NODE), nodesText);
    assert.ok(nodesText.includes(HOSTILE_VERSION), nodesText);
    assert.match(nodesText, /n1\s*running\s*\d+(\.\d)?s ago\s*[+-]\d/);
    assert.match(nodesText, /version/);
    assert.doesNotMatch(page.body, /<img src=x|<script>alert/);
    assert.equal(page.body.match(/<script>/g)?.length, 1);

    // The fenced run's bar: its own class and the node in its title; the running one's node too.
    const bar = new RegExp(
      `<title>run ${old.id}: fenced \\(node n2&#39;s lease ran out; node n1 took the job over\\)[^<]*, node n2</title><rect class="bar s-fenced"`,
    );
    assert.match(page.body, bar);
    assert.match(page.body, new RegExp(`<title>run ${next.id}: running[^<]*, node n1</title>`));
    assert.match(textOf(page.body), new RegExp(`run ${next.id} on node n1 since`));
    assert.match(elements(page.body, "div", 'class="legend"')[0], /k-fenced"><\/i>fenced/);

    // Its run page: the node, and what fenced means.
    const runText = textOf((await get(`/runs/${old.id}`)).body);
    // Its log is on n2: the page says so (or shows the tail the store keeps), not a bad path.
    assert.doesNotMatch(runText, /not under/);
    assert.match(runText, /ran on node n2; its log is there|The end of the log/);
    assert.match(runText, /node\s+n2\n/);
    assert.match(
      runText,
      /fenced\s+taken over by node n1 after node n2's lease ran out: from then on none of the run's marker writes was applied/,
    );

    // why of its slot, from the CLI and on the page: the same sentences, naming both nodes.
    const slot = new Date(old.slot).toISOString();
    const whyCli = cli(["why", "long", "--at", slot, "-c", c1]);
    assert.equal(whyCli.code, 0, whyCli.stderr);
    const lines = whyCli.stdout.trim().split("\n");
    assert.ok(
      lines.some((l) =>
        /^Fenced: node n2's lease ran out while run \d+ ran, and node n1 took the job over/.test(l),
      ),
      whyCli.stdout,
    );
    const whyPage = (await get(`/why/long?at=${slot}`)).body;
    const sentences = elements(elements(whyPage, "section", 'class="why"')[0], "p", "").map(textOf);
    assert.deepEqual(sentences, lines);
    const json = JSON.parse(cli(["why", "long", "--at", slot, "--json", "-c", c1]).stdout);
    assert.deepEqual([json.run_id, json.node, json.disposition], [old.id, "n2", "ran"]);

    // In Chromium, light and dark: fenced has a colour of its own, on the bar and in the legend.
    for (const colorScheme of ["light", "dark"]) {
      const ctx = await browser.newContext({ colorScheme });
      const c = await coloursIn(ctx, `http://127.0.0.1:${port}/`);
      await ctx.close();
      assert.deepEqual(c.errors, [], colorScheme);
      assert.equal(c.bar, c.fenced, `${colorScheme}: the fenced bar has the fenced colour`);
      assert.equal(c.key, c.fenced, `${colorScheme}: the legend's key`);
      assert.ok(!c.others.includes(c.fenced), `${colorScheme}: ${c.fenced} vs ${c.others}`);
      assert.match(c.legend, /fenced/);
      assert.ok(c.nodes.includes(HOSTILE_NODE), `${colorScheme}: the hostile name as text`);
    }
  },
);

// The status page as a newcomer met it (issue 37), in Chromium: a job's timeline after its old
// runs were pruned says so instead of showing an idle day, an `ok` job whose last run was killed
// is not drawn as a success, and no date breaks across lines on a narrow screen.
/* global document -- in page.evaluate, run by the browser */
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import { launchChromium, chromiumMissing } from "./browser.js";
import { cli, spawnCli, tmpdir, waitFor, readStore } from "./helpers.js";
import { pageDaemon } from "./page-helpers.js";
import { needs } from "./needs.js";

const skip = chromiumMissing;

let browser;
before(async () => {
  if (skip) return;
  browser = await launchChromium();
});
after(() => browser?.close());

test(
  "the page: a pruned timeline says so, ok beside a killed run is not green, dates never wrap",
  needs(skip),
  async (t) => {
    const dir = tmpdir(t);
    const state = path.join(dir, ".cronvisor");
    const slow = path.join(dir, "slow");
    const p = await pageDaemon(t, dir, [
      "jobs:",
      "  busy:",
      '    schedule: "* * * * * *"',
      "    command: 'true'",
      "    log: { keep_runs: 3 }",
      "  stopped:",
      '    schedule: "0 0 1 1 *"',
      `    command: "if [ -e ${slow} ]; then echo started; sleep 60; fi"`,
      "    kill_grace: 1s",
    ]);
    // busy: more runs than it keeps, so the oldest are pruned.
    await waitFor(
      () => readStore(state).runs({ job: "busy" })[0]?.id > 3,
      "busy's first runs pruned",
    );
    // stopped: one success, then a run interrupted by its operator (recorded killed).
    assert.equal(cli(["run", "stopped", "-c", p.cfg]).code, 0);
    fs.writeFileSync(slow, "");
    const run = spawnCli(["run", "stopped", "-c", p.cfg]);
    // Its output relayed: `cronvisor run` supervises it (and handles Ctrl-C) by then.
    await waitFor(() => run.out.includes("started"), "the second run of stopped going");
    run.kill("SIGINT");
    await run.exited;
    await waitFor(
      () => readStore(state).runs({ job: "stopped" }).at(-1).status === "killed",
      "the second run recorded killed",
    );

    const ctx = await browser.newContext({ viewport: { width: 380, height: 800 } });
    const page = await ctx.newPage();
    await page.goto(`http://127.0.0.1:${p.port}/`);
    const got = await page.evaluate(() => {
      const li = (n) => document.querySelector(`#job-${n}`);
      return {
        pruned: li("busy").querySelector("svg.tl rect.pruned title")?.textContent ?? null,
        prunedNote: li("busy").querySelector(".pruned-note")?.textContent ?? null,
        stoppedBadge: li("stopped").querySelector(".health").textContent,
        stoppedHealth: li("stopped").dataset.health,
        busyBadge: li("busy").querySelector(".health").textContent,
        // A date wrapped across lines is an inline box of two rectangles.
        wrapped: [...document.querySelectorAll("time")]
          .filter((e) => e.getClientRects().length > 1)
          .map((e) => e.textContent),
        times: document.querySelectorAll("time").length,
      };
    });
    await ctx.close();
    assert.match(
      String(got.pruned),
      /^No record before \d{4}-\d\d-\d\d \d\d:\d\d \S+: busy keeps its last 3 runs \(log\.keep_runs\), older ones are pruned$/,
    );
    assert.equal(got.prunedNote, got.pruned);
    assert.equal(got.stoppedHealth, "ok");
    assert.equal(got.stoppedBadge, "ok, last run killed");
    assert.equal(got.busyBadge, "ok");
    assert.ok(got.times > 4, `${got.times} dates on the page`);
    assert.deepEqual(got.wrapped, [], "dates broken across lines at 380 px");
  },
);

// One run's page (`GET /runs/ID`): what the store recorded of it, with links to the `why` of its
// slot. Its command and the tail of its log are shown only when the config sets `http_logs:
// true`: any local user can reach the http port, while the logs are 0600 on disk and a command
// line may carry a secret. With `?follow=1` a running run's page follows its log (the script
// fetches it again every 2 s; without the script the page reloads itself).
import fs from "node:fs";
import path from "node:path";
import { READ_NOFOLLOW } from "../core/safe-path.js";
import { escLines, h, notice, page, timeEl, trusted, type Markup } from "./page-html.js";
import { rowHref, statusText, runLength } from "./page-timeline.js";
import { fencing } from "../health/why-fenced.js";
import type { HttpResponse } from "./http.js";
import type { RunRow, Store } from "../store/store.js";
import type { Config, JobConfig } from "../core/types.js";

/** The most of a log the page shows: its end. */
export const LOG_TAIL_BYTES = 64 * 1024;
const FOLLOW_EVERY_S = 2;

export interface LogTail {
  text: string;
  /** Bytes before the tail that are not shown. */
  skipped: number;
}

/**
 * The last `max` bytes of a run's log, from its first whole line; null with the reason when it
 * cannot be read. Only a regular file inside the state dir's logs/ is read, never through a link
 * and never waiting on a FIFO.
 */
export function readLogTail(
  logPath: string,
  stateDir: string,
  max = LOG_TAIL_BYTES,
): LogTail | string {
  const logs = path.join(stateDir, "logs") + path.sep;
  if (!path.resolve(logPath).startsWith(logs))
    return "the recorded log path is not under the state dir's logs/";
  let fd: number;
  try {
    fd = fs.openSync(logPath, READ_NOFOLLOW);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === "ENOENT"
      ? "the log file is gone (removed or pruned)"
      : code === "ELOOP"
        ? "the log path is a link; it is not read"
        : `the log cannot be read (${code ?? "error"})`;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return "the log path is not a regular file; it is not read";
    const start = Math.max(0, st.size - max);
    const buf = Buffer.alloc(st.size - start);
    let got = 0;
    while (got < buf.length) {
      const n = fs.readSync(fd, buf, got, buf.length - got, start + got);
      if (n <= 0) break;
      got += n;
    }
    let text = buf.subarray(0, got).toString("utf8");
    let skipped = start;
    if (start > 0) {
      // Start at a whole line (the cut may fall inside a line or a UTF-8 sequence).
      const nl = text.indexOf("\n");
      if (nl >= 0 && nl < text.length - 1) {
        skipped += Buffer.byteLength(text.slice(0, nl + 1));
        text = text.slice(nl + 1);
      }
    }
    return { text, skipped };
  } finally {
    fs.closeSync(fd);
  }
}

const AS_INTERRUPTED = "health, alerts and catch-up treat it as interrupted";

/** What `fenced` means for this run: who took the job over, or why its own node stopped it. */
function fencedMeaning(r: RunRow): Markup | "" {
  if (r.status !== "fenced") return "";
  const f = fencing(r.reason);
  const meaning =
    f.kind === "taken_over"
      ? `taken over by node ${f.by} after node ${f.lost}'s lease ran out: from then on none of the run's marker writes was applied; ${AS_INTERRUPTED}`
      : f.kind === "self"
        ? `node ${f.node} could not renew its lease for ${f.silent}, so it stopped the run before the lease ran out, and another node may take the job over; ${AS_INTERRUPTED}`
        : `taken over by another node after this node's lease ran out; ${AS_INTERRUPTED}`;
  return h`<dt>fenced</dt>
    <dd>${meaning}</dd>`;
}

function facts(r: RunRow, zone: string, now: number): Markup {
  const slot =
    r.slot === null
      ? h`none (${r.trigger ?? "manual"} run)`
      : h`${timeEl(new Date(r.slot).toISOString(), zone, true)} ·
          <a href="${rowHref(r.job, r)}">why</a>`;
  const end = r.finished_at;
  const duration =
    r.duration_ms !== null
      ? runLength(r.duration_ms)
      : end === null
        ? `running for ${runLength(now - r.started_at)}`
        : "-";
  const exit =
    r.signal !== null
      ? `signal ${r.signal}`
      : r.exit_code !== null
        ? `exit code ${r.exit_code}`
        : "-";
  const progress =
    r.progress_at === null
      ? h`none`
      : h`${timeEl(new Date(r.progress_at).toISOString(), zone, true)}${r.progress_msg === null ? "" : h`: ${r.progress_msg}`}`;
  return h`<dl class="run" id="run" data-live-part>
    <dt>status</dt>
    <dd>
      <strong class="h-${r.status === "ok" ? "ok" : r.status === "running" ? "" : "failing"}"
        >${statusText(r)}</strong
      >
    </dd>
    ${fencedMeaning(r)}
    <dt>trigger</dt>
    <dd>${r.trigger ?? "-"}, attempt ${r.attempt}</dd>
    <dt>slot</dt>
    <dd>${slot}</dd>
    <dt>node</dt>
    <dd>${r.node ?? "not recorded"}</dd>
    <dt>started</dt>
    <dd>${timeEl(new Date(r.started_at).toISOString(), zone, true)}</dd>
    <dt>ended</dt>
    <dd>${end === null ? "not yet" : timeEl(new Date(end).toISOString(), zone, true)}</dd>
    <dt>duration</dt>
    <dd>${duration}</dd>
    <dt>cost</dt>
    <dd>${cost(r)}</dd>
    <dt>exit</dt>
    <dd>${exit}</dd>
    <dt>reason</dt>
    <dd>${r.reason ?? "-"}</dd>
    <dt>markers</dt>
    <dd>${r.markers_new} new, ${r.markers_skipped} already done</dd>
    <dt>last progress</dt>
    <dd>${progress}</dd>
    <dt>pid</dt>
    <dd>${r.pid ?? "-"}</dd>
  </dl>`;
}

/** What a finished run took: its CPU seconds and peak memory (all its processes'), or "-". */
function cost(r: RunRow): string {
  if ((r.cpu_s ?? null) === null || (r.memory_peak_bytes ?? null) === null) return "-";
  const mib = (r.memory_peak_bytes as number) / 1024 / 1024;
  return `${(r.cpu_s as number).toFixed(2)} s CPU, ${mib.toFixed(mib < 10 ? 1 : 0)} MiB peak memory`;
}

function commandPart(job: JobConfig | undefined): Markup {
  if (!job) return h`<p>The job is no longer in the config the daemon runs.</p>`;
  const cmd = typeof job.command === "string" ? job.command : JSON.stringify(job.command);
  return h`<p>
      As the config the daemon runs now has it
      (${typeof job.command === "string" ? "run by the shell" : "exec'd as argv"}):
    </p>
    <pre class="log"><code>${cmd}</code></pre>`;
}

/**
 * The tail the store keeps of a run of another node of a shared store (its file is on that
 * node), as `cronvisor logs` prints it; the sentence why none is shown when the store has none.
 */
async function otherNodeTail(r: RunRow, store: Store): Promise<LogTail | string> {
  const tail = await store.logTail(r.id);
  if (tail === null)
    return `run ${r.id} ran on node ${r.node}${r.status === "running" ? " and is still running" : ""}; its log is there (${r.log_path}), and the store has none of it yet`;
  const skipped = Math.max(0, (r.log_bytes ?? tail.length) - tail.length);
  return { text: tail.toString("utf8"), skipped };
}

function logPart(r: RunRow, tail: LogTail | string, follow: boolean): Markup {
  if (r.log_path === null)
    return h`<p>This run has no log (a slot disposition, or it never started).</p>`;
  const running = r.status === "running";
  const toggle = running
    ? follow
      ? h`<p>
          Following the log (every ${FOLLOW_EVERY_S} s). <a href="/runs/${r.id}">Stop following</a>
        </p>`
      : h`<p><a href="/runs/${r.id}?follow=1">Follow the log</a> while the run goes on.</p>`
    : "";
  if (typeof tail === "string")
    return h`${toggle}
      <p id="log" data-live-part>No log shown: ${tail}.</p>`;
  const cut =
    tail.skipped > 0
      ? h`<p>
          The first ${tail.skipped} bytes are not shown;
          <code>cronvisor logs ${r.job} --run ${r.id}</code> prints the whole log.
        </p>`
      : "";
  return h`${toggle}${cut}
    <pre class="log" id="log" data-live-part tabindex="0" aria-label="The end of the log">${trusted(escLines(tail.text))}</pre>`;
}

const GATED = h`<p>
  The command and the log are not shown here: set <code>http_logs: true</code> in the config to show
  them (any local user can reach this port, while logs are 0600 on disk).
  <code>cronvisor logs JOB --run ID</code> prints a log.
</p>`;

/** What every page handler reads from: the worker's config, store, state dir and clock. */
export interface PageContext {
  config: Config;
  store: Store;
  /** The daemon's state dir (where its logs are), fixed at its start. */
  stateDir: string;
  now: number;
}

export async function runPage(
  { config, store, stateDir, now }: PageContext,
  idText: string,
  query: URLSearchParams,
): Promise<HttpResponse> {
  const id = /^[1-9][0-9]{0,15}$/.test(idText) ? Number(idText) : null;
  const r = id === null ? null : await store.run(id);
  if (!r)
    return notice(
      404,
      "no such run",
      `There is no run ${idText} in the store (runs beyond a job's keep_runs are pruned).`,
    );
  const job = config.jobs.find((j) => j.name === r.job);
  const zone = job?.timezone ?? config.timezone;
  const follow = query.get("follow") === "1" && r.status === "running";
  const logs = config.httpLogs === true;
  // A run of another node: its log file is there, not under this daemon's logs/.
  const elsewhere = store.shared && r.node !== null && r.node !== store.node;
  const tail =
    !logs || r.log_path === null
      ? ""
      : elsewhere
        ? await otherNodeTail(r, store)
        : readLogTail(r.log_path, stateDir);
  const body = h`<p><a href="/">Status page</a> › <a href="/#job-${r.job}">${r.job}</a></p>
    <h1>Run ${r.id} of ${r.job}</h1>
    ${facts(r, zone, now)}
    <h2>Command</h2>
    ${logs ? commandPart(job) : GATED}
    <h2>Log</h2>
    ${logs ? logPart(r, tail, follow) : h`<p>Not shown (see above).</p>`}`;
  return page({
    title: `cronvisor: run ${r.id} of ${r.job}: ${r.status}`,
    body,
    ...(follow ? { live: FOLLOW_EVERY_S, refreshS: FOLLOW_EVERY_S + 1, follow: true } : {}),
  });
}

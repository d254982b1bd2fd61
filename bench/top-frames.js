// Summarise a V8 .cpuprofile (from `node --cpu-prof`): the functions with the most self time and
// the most total (inclusive) time, each as a share of the profile.
//
//   node bench/top-frames.js FILE.cpuprofile [--top 20] [--match TEXT]
//
// --match keeps only frames whose function name or file contains TEXT (e.g. --match dist/).
import fs from "node:fs";
import path from "node:path";

const [file, ...rest] = process.argv.slice(2);
if (!file) {
  process.stderr.write(
    "usage: node bench/top-frames.js FILE.cpuprofile [--top N] [--match TEXT]\n",
  );
  process.exit(2);
}
const opt = (n, d) => {
  const i = rest.indexOf(`--${n}`);
  return i < 0 ? d : rest[i + 1];
};
const top = Number(opt("top", "20"));
const match = opt("match", null);

const prof = JSON.parse(fs.readFileSync(file, "utf8"));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
// Self time per node: the sampling interval of each sample that landed on it.
const self = new Map();
for (let i = 0; i < prof.samples.length; i++) {
  const dt = prof.timeDeltas[i + 1] ?? 0;
  self.set(prof.samples[i], (self.get(prof.samples[i]) ?? 0) + dt);
}
const total = [...self.values()].reduce((a, b) => a + b, 0);

const keyOf = (cf) =>
  `${cf.functionName || "(anonymous)"} ${cf.url ? `${path.basename(cf.url)}:${cf.lineNumber + 1}` : ""}`.trim();

const selfBy = new Map();
const inclBy = new Map();
// Depth-first from the root, counting each function once per stack (recursion is not double counted).
const walk = (node, onStack) => {
  const k = keyOf(node.callFrame);
  const s = self.get(node.id) ?? 0;
  selfBy.set(k, (selfBy.get(k) ?? 0) + s);
  let sub = s;
  const first = !onStack.has(k);
  if (first) onStack.add(k);
  for (const c of node.children ?? []) sub += walk(byId.get(c), onStack);
  if (first) {
    onStack.delete(k);
    inclBy.set(k, (inclBy.get(k) ?? 0) + sub);
  }
  return sub;
};
walk(prof.nodes[0], new Set());

const show = (title, m) => {
  process.stdout.write(`${title} (of ${(total / 1000).toFixed(0)} ms sampled)\n`);
  const rows = [...m.entries()]
    .filter(([k]) => !match || k.includes(match))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top);
  for (const [k, v] of rows) {
    process.stdout.write(
      `  ${((100 * v) / total).toFixed(1).padStart(5)}%  ${(v / 1000).toFixed(0).padStart(7)} ms  ${k}\n`,
    );
  }
};
show("self time", selfBy);
show("total time", inclBy);

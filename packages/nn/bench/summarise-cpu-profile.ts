/**
 * Self time by function of a V8 .cpuprofile (from `node --cpu-prof`), largest first, and the
 * total time under chosen functions (inclusive), as percentages of the sampled time.
 *
 *   node --import tsx bench/summarise-cpu-profile.ts file.cpuprofile [top=25] [under] [steps]
 *
 * With `under` (a function name, e.g. `run`), only samples inside that function count (startup,
 * module loading and idle time drop out), and with `steps` each line also gives CPU ms per step.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArgument, under, stepsArgument] = process.argv.slice(2);
const steps = stepsArgument === undefined ? null : Number(stepsArgument);
const profile = JSON.parse(readFileSync(file!, 'utf8')) as Profile;
const top = Number(topArgument ?? 25);
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const parent = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

const selfTime = new Map<number, number>();
let total = 0;
function isUnder(id: number): boolean {
  if (under === undefined) return true;
  for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor))
    if (byId.get(cursor)!.callFrame.functionName === under) return true;
  return false;
}

profile.samples.forEach((id, index) => {
  const delta = profile.timeDeltas[index] ?? 0;
  if (!isUnder(id)) return;
  selfTime.set(id, (selfTime.get(id) ?? 0) + delta);
  total += delta;
});

function label(node: ProfileNode): string {
  const url = node.callFrame.url.replace(/^.*\/(node_modules|packages)\//, '');
  return `${node.callFrame.functionName || '(anonymous)'} ${url}:${node.callFrame.lineNumber + 1}`;
}

const self = new Map<string, number>();
const inclusive = new Map<string, number>();
for (const [id, time] of selfTime) {
  const node = byId.get(id)!;
  self.set(label(node), (self.get(label(node)) ?? 0) + time);
  const seen = new Set<string>();
  for (let cursor: number | undefined = id; cursor !== undefined; cursor = parent.get(cursor)) {
    const name = label(byId.get(cursor)!);
    if (seen.has(name)) continue;
    seen.add(name);
    inclusive.set(name, (inclusive.get(name) ?? 0) + time);
  }
}
const percent = (time: number) =>
  `${((100 * time) / total).toFixed(1)}%${steps === null ? '' : ` ${(time / 1000 / steps).toFixed(2).padStart(6)} ms/step`}`;
console.log(`sampled ${(total / 1000).toFixed(0)} ms${under === undefined ? '' : ` inside ${under}`}`);
console.log('\nself time');
for (const [name, time] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${percent(time).padStart(6)}  ${name}`);
console.log('\ninclusive time');
for (const [name, time] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top * 2))
  console.log(`${percent(time).padStart(6)}  ${name}`);

/**
 * Where a training epoch's main-thread time goes, from a V8 CPU profile (src/cpu-profile.ts):
 * each sample is charged to the innermost frame of its stack that names a phase of a training
 * step (model.fit's or ShardedTrainer's), else to "other".
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/**
 * Function name (V8 may prefix the class: `AdamOptimizer.applyGradients`) and, where names are
 * common, a piece of its file's URL → phase.
 */
const phases: { functionName: string; url?: string; phase: string }[] = [
  { functionName: '(garbage collector)', phase: 'garbage collection' },
  { functionName: 'allReduceSumInPlace', phase: 'loss/metrics all-reduce (waits for the slower rank)' },
  { functionName: 'loadGradients', phase: 'gradient copy into the flat buffer' },
  { functionName: 'startReduction', phase: 'gradient all-reduce / reduce-scatter' },
  { functionName: 'finishReduction', phase: 'gradient all-reduce / reduce-scatter' },
  { functionName: 'writeBack', phase: 'write-back into the variables (all-gather)' },
  { functionName: 'step', url: '/optim/', phase: 'optimizer step' },
  { functionName: 'applyGradients', phase: 'optimizer step' },
  { functionName: 'computeLocalGradients', phase: 'forward + backward' },
  { functionName: 'computeGradients', phase: 'forward + backward' },
  { functionName: 'trainBatch', phase: 'per-step JavaScript (batch slicing, loop)' },
];

export const phaseOrder = [
  'forward + backward',
  'optimizer step',
  'gradient copy into the flat buffer',
  'loss/metrics all-reduce (waits for the slower rank)',
  'gradient all-reduce / reduce-scatter',
  'write-back into the variables (all-gather)',
  'per-step JavaScript (batch slicing, loop)',
  'garbage collection',
  'other (fit loop, callbacks, idle)',
];

/** Milliseconds per phase of the profile, and the total. */
export function summarizeProfile(path: string): { phases: Map<string, number>; totalMs: number } {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const phaseOf = new Map<number, string>();
  const classify = (id: number): string => {
    const known = phaseOf.get(id);
    if (known !== undefined) return known;
    const frame = byId.get(id)!.callFrame;
    const match = phases.find(
      (entry) =>
        (frame.functionName === entry.functionName ||
          frame.functionName.endsWith(`.${entry.functionName}`)) &&
        (entry.url === undefined || frame.url.includes(entry.url)),
    );
    const above = parent.get(id);
    const phase =
      match?.phase ?? (above === undefined ? 'other (fit loop, callbacks, idle)' : classify(above));
    phaseOf.set(id, phase);
    return phase;
  };
  const result = new Map<string, number>();
  let totalMs = 0;
  profile.samples.forEach((id, index) => {
    const ms = (profile.timeDeltas[index] ?? 0) / 1000;
    const phase = classify(id);
    result.set(phase, (result.get(phase) ?? 0) + ms);
    totalMs += ms;
  });
  return { phases: result, totalMs };
}

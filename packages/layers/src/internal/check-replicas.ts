import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import type { LayerVariable } from '@tensorflow/tfjs-layers';
import { LayersError } from '../errors';

export type InitialWeights = 'broadcast' | 'check';

function hashText(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0;
}

function hashValues(values: Float32Array): number {
  const words = new Int32Array(values.buffer, values.byteOffset, values.length);
  let hash = 0x811c9dc5;
  for (let index = 0; index < words.length; index++) hash = Math.imul(hash ^ words[index]!, 0x01000193);
  return hash | 0;
}

function describe(variable: LayerVariable | undefined): string {
  return variable === undefined ? 'no weight' : `${variable.name} [${variable.shape.join(', ')}]`;
}

/**
 * Checks that every rank holds the same model: the same number of weights, the same shapes and,
 * with 'check', the same values (a 32-bit hash per weight, all-gathered). With 'broadcast' the
 * values of rank 0 are then copied to every rank (tfjs initializers are not seeded, so
 * independently built models differ). A difference throws on every rank, naming the first
 * differing weight.
 */
export function checkReplicas(
  group: ProcessGroup,
  variables: readonly LayerVariable[],
  mode: InitialWeights,
): void {
  if (group.size === 1) return;
  const counts = allocateShared(Int32Array, group.size);
  group.allGather(counts, new Int32Array([variables.length])).wait();
  const length = Math.max(...counts);
  const signature = allocateShared(Int32Array, length);
  variables.forEach((variable, index) => {
    let hash = hashText(variable.shape.join(','));
    if (mode === 'check')
      hash = Math.imul(hash ^ hashValues(variable.read().dataSync() as Float32Array), 0x01000193);
    signature[index] = hash;
  });
  const all = allocateShared(Int32Array, length * group.size);
  group.allGather(all, signature).wait();
  for (let index = 0; index < length; index++) {
    const expected = all[index]!;
    for (let rank = 1; rank < group.size; rank++) {
      const found = all[rank * length + index]!;
      const missing = index >= counts[rank]! || index >= counts[0]!;
      if (found === expected && !missing) continue;
      const what = mode === 'check' ? 'shape or values' : 'shape';
      throw new LayersError(
        `The model differs across ranks: weight ${index} (${describe(variables[index])} on rank ${group.rank}) has a different ${missing ? 'presence' : what} on rank ${rank} than on rank 0 (ranks hold ${[...counts].join(', ')} trainable weights).`,
        {
          code: 'replica-mismatch',
          rank,
          ...(variables[index] === undefined ? {} : { weight: variables[index]!.name }),
          expected: `rank ${rank} equal to rank 0`,
          actual: 'different',
          fix:
            mode === 'check' && !missing
              ? "build the same model everywhere and either seed its initializers, load the same weights on every rank, or use initialWeights: 'broadcast' (the default) to copy rank 0's."
              : 'build the same architecture on every rank (same layers, same order, same shapes).',
        },
      );
    }
  }
}

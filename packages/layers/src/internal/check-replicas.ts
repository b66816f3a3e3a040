import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import type { LayersModel, LayerVariable } from '@tensorflow/tfjs-layers';
import { LayersError } from '../errors';

/** How ranks start from the same weights: 'broadcast' copies rank 0's, 'check' requires them equal. */
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

function describe(variable: LayerVariable, trainable: boolean): string {
  return `${variable.name} [${variable.shape.join(', ')}], ${trainable ? 'trainable' : 'frozen'}`;
}

/**
 * Checks that every rank holds the same model: the same number of weights (trainable and frozen),
 * the same shapes, the same weights trainable and, with 'check', the same values (a 32-bit hash
 * per weight, all-gathered). With 'broadcast' the values of rank 0 are then copied to every rank
 * (tfjs initializers are not seeded, so independently built models differ). A difference throws on
 * every rank, naming the first differing weight.
 */
export function checkReplicas(
  group: ProcessGroup,
  model: Pick<LayersModel, 'weights' | 'trainableWeights'>,
  mode: InitialWeights,
): void {
  if (group.size === 1) return;
  const variables = model.weights; // trainable and frozen
  const trainable = new Set(model.trainableWeights);
  const counts = allocateShared(Int32Array, 2 * group.size); // per rank: weights, trainable weights
  group.allGather(counts, new Int32Array([variables.length, trainable.size])).wait();
  const weightCounts = Array.from({ length: group.size }, (_, rank) => counts[2 * rank]!);
  const trainableCounts = Array.from({ length: group.size }, (_, rank) => counts[2 * rank + 1]!);
  const length = Math.max(...weightCounts);
  const signature = allocateShared(Int32Array, length);
  variables.forEach((variable, index) => {
    let hash = hashText(`${variable.shape.join(',')} ${trainable.has(variable) ? 'trainable' : 'frozen'}`);
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
      const missing = index >= weightCounts[rank]! || index >= weightCounts[0]!;
      if (found === expected && !missing) continue;
      const what = mode === 'check' ? 'shape, trainable flag or values' : 'shape or trainable flag';
      const variable = variables[index];
      const described = variable === undefined ? 'no weight' : describe(variable, trainable.has(variable));
      throw new LayersError(
        `The model differs across ranks: weight ${index} (${described} on rank ${group.rank}) has a different ${missing ? 'presence' : what} on rank ${rank} than on rank 0 (ranks hold ${weightCounts.join(', ')} weights, ${trainableCounts.join(', ')} of them trainable).`,
        {
          code: 'replica-mismatch',
          rank,
          ...(variable === undefined ? {} : { weight: variable.name }),
          expected: `rank ${rank} equal to rank 0`,
          actual: 'different',
          fix:
            mode === 'check' && !missing
              ? "build the same model everywhere and either seed its initializers, load the same weights on every rank, or use initialWeights: 'broadcast' (the default) to copy rank 0's."
              : 'build the same architecture on every rank (same layers, same order, same shapes, the same layers frozen).',
        },
      );
    }
  }
}

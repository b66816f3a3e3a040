import { Parameter, Storage, TensorView } from '@fsdp-ts/tensor';

/**
 * cuts[parameter] = W + 1 sorted offsets from 0 to numel: rank r owns elements
 * [cuts[r], cuts[r + 1]) of that parameter (empty when equal).
 */
export type Cuts = number[][];

/** Deterministic cut points with some empty pieces, from a seed (no Math.random in tests). */
export function makeCuts(numels: readonly number[], worldSize: number, seed: number): Cuts {
  let state = seed >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  return numels.map((numel) => {
    const inner = Array.from({ length: worldSize - 1 }, () =>
      next() < 0.25 ? (next() < 0.5 ? 0 : numel) : Math.floor(next() * (numel + 1)),
    ).sort((first, second) => first - second);
    return [0, ...inner, numel];
  });
}

/** Offsets of each parameter in one flat buffer of all parameters (registration order). */
export function flatOffsets(numels: readonly number[]): number[] {
  const offsets: number[] = [];
  let total = 0;
  for (const numel of numels) {
    offsets.push(total);
    total += numel;
  }
  return offsets;
}

/**
 * Rank `rank`'s Parameters: each has its original shape but `data` re-pointed at a 1-D view of its
 * piece inside `flat` (one storage holding every parameter, as an FSDP flat parameter does).
 */
export function shardedParameters(
  template: readonly { name: string; shape: readonly number[] }[],
  flat: Storage,
  cuts: Cuts,
  rank: number,
): Parameter[] {
  const offsets = flatOffsets(template.map(({ shape }) => shape.reduce((a, b) => a * b, 1)));
  return template.map(({ name, shape }, index) => {
    const param = Parameter.zeros(shape, { name });
    const start = cuts[index]![rank]!;
    const end = cuts[index]![rank + 1]!;
    param.data = new TensorView(flat, offsets[index]! + start, [end - start]);
    return param;
  });
}

/** The piece of a full flat gradient that `param` (sharded as above) owns, as its own 1-D view. */
export function gradPiece(values: readonly number[], cuts: Cuts, index: number, rank: number): TensorView {
  const start = cuts[index]![rank]!;
  const end = cuts[index]![rank + 1]!;
  return TensorView.fromArray(values.slice(start, end), [end - start]);
}

export function flatStorageOf(values: readonly (readonly number[])[], shared: boolean): Storage {
  const storage = Storage.allocate(
    'float32',
    values.reduce((sum, list) => sum + list.length, 0),
    { shared },
  );
  const array = storage.array() as Float32Array;
  let offset = 0;
  for (const list of values) {
    array.set(list, offset);
    offset += list.length;
  }
  return storage;
}

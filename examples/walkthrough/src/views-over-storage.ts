/** Layer 1, @fsdp-ts/tensor alone: one Storage, several views, a Parameter re-pointed in O(1). */
import { Parameter, Storage, TensorView } from '@fsdp-ts/tensor';

export function viewsOverStorage(log: (line: string) => void) {
  const storage = Storage.allocate('float32', 12);
  const matrix = new TensorView(storage, 0, [3, 4]); // all 12 elements as [3, 4]
  matrix.fill(1);
  const row = matrix.narrow(0, 1, 1); // row 1: a view, no copy
  row.fill(5);
  const transposed = matrix.transpose(0, 1); // [4, 3], strided over the same memory
  log(`matrix ${JSON.stringify(matrix.shape)} = ${JSON.stringify(matrix.toArray())}`);
  log(
    `transposed ${JSON.stringify(transposed.shape)}, element [2, 1] = ${transposed.get([2, 1])} (matrix[1, 2])`,
  );
  const weight = new Parameter(matrix, { name: 'weight' });
  weight.data = new TensorView(storage, 4, [4]); // re-point at a 1-D part: same object, shape kept
  log(
    `parameter shape ${JSON.stringify(weight.shape)}, data now ${JSON.stringify(weight.data.shape)} = ${JSON.stringify(weight.data.toArray())}`,
  );
  return {
    storageValues: Array.from(storage.array()),
    parameterShape: [...weight.shape],
    dataShape: [...weight.data.shape],
  };
}

let ones = new Float32Array(0);

/**
 * A row of at least `length` ones (JavaScript memory, kept between calls, grown on demand): the
 * left operand of an sgemm that sums the rows of a matrix (bias and layer-norm gradients).
 */
export function onesRow(length: number): Float32Array {
  if (ones.length < length) ones = new Float32Array(Math.max(length, 2 * ones.length)).fill(1);
  return ones;
}

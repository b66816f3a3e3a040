/** Σx² of an array (for LARS's weight and gradient norms). */
export function sumOfSquares(values: Float32Array): number {
  let sum = 0;
  for (let index = 0; index < values.length; index++) sum += values[index]! * values[index]!;
  return sum;
}

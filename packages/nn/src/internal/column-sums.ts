/**
 * Column sums of `rows` rows of `width` float32 values (row-major, from `offset`) into `sums`
 * (float64, added to), four rows per pass over `sums`.
 *
 * [Note: float64 column sums]
 * Bias and layer-norm gradients are sums over every token of the batch. FSDP's parity tests
 * compare the mean of per-rank sums with one sum over the whole batch at 1e-5 of the largest
 * gradient; float32 sums in different orders (an sgemm with a row of ones) missed that at W=3,
 * float64 sums do not. Four rows per pass cut the read-modify-writes of `sums`, which were most of
 * the cost of the one-row loop.
 */
export function addColumnSums(
  values: Float32Array,
  offset: number,
  rows: number,
  width: number,
  sums: Float64Array,
): void {
  let row = 0;
  for (; row + 4 <= rows; row += 4) {
    const base = offset + row * width;
    for (let column = 0; column < width; column++) {
      const at = base + column;
      sums[column]! +=
        values[at]! + values[at + width]! + (values[at + 2 * width]! + values[at + 3 * width]!);
    }
  }
  for (; row < rows; row++) {
    const base = offset + row * width;
    for (let column = 0; column < width; column++) sums[column]! += values[base + column]!;
  }
}

/**
 * The causal softmax of one head's `time × time` score matrix, row by row: row r over columns
 * 0..r (the maximum subtracted first; sums in float64, JavaScript's numbers), zero above the
 * diagonal. `scores` and `probabilities` may be the same array (in place).
 */
export function causalSoftmaxRows(scores: Float32Array, probabilities: Float32Array, time: number): void {
  for (let row = 0; row < time; row++) {
    const base = row * time;
    let max = Number.NEGATIVE_INFINITY;
    for (let column = 0; column <= row; column++) max = Math.max(max, scores[base + column]!);
    let sum = 0;
    for (let column = 0; column <= row; column++) {
      const weight = Math.exp(scores[base + column]! - max);
      probabilities[base + column] = weight;
      sum += weight;
    }
    const inverse = 1 / sum;
    for (let column = 0; column <= row; column++) probabilities[base + column]! *= inverse;
    for (let column = row + 1; column < time; column++) probabilities[base + column] = 0;
  }
}

/**
 * The causal softmax's backward, row by row: dS = P ⊙ (dP − Σ_c dP·P) over columns 0..r, zero
 * above the diagonal. `probabilityGradient` (dP) and `scoreGradient` (dS) may be the same array.
 */
export function causalSoftmaxGradientRows(
  probabilityGradient: Float32Array,
  probabilities: Float32Array,
  scoreGradient: Float32Array,
  time: number,
): void {
  for (let row = 0; row < time; row++) {
    const base = row * time;
    let dot = 0;
    for (let column = 0; column <= row; column++)
      dot += probabilityGradient[base + column]! * probabilities[base + column]!;
    for (let column = 0; column <= row; column++)
      scoreGradient[base + column] =
        probabilities[base + column]! * (probabilityGradient[base + column]! - dot);
    for (let column = row + 1; column < time; column++) scoreGradient[base + column] = 0;
  }
}

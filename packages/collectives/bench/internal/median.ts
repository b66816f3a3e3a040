/**
 * The median of a sample: the middle value, or for an even count the mean of the two middle
 * values (taking the upper one, as this bench did before, leans optimistic for rates and
 * pessimistic for times, and with two interleaved rounds it is simply the larger of the two).
 */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

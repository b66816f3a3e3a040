/** How launcher logs and errors name a node's consecutive ranks: `rank 2`, or `ranks 2-3`. */
export function describeRanks(first: number, count: number): string {
  return count === 1 ? `rank ${first}` : `ranks ${first}-${first + count - 1}`;
}

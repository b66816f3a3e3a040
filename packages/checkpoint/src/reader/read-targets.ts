import type { StatePiece } from '../sharded-state/optimizer-state';
import type { PlannedRead } from './verified-range-reader';

/**
 * Points reads planned against a flat shard's layout (`targetOffset` in elements of the shard)
 * at the arrays that hold each parameter's part instead: `pieces` (sorted by `offset`), one per
 * parameter, each `values.length` elements starting `offset` elements into the shard. A read
 * lies inside one parameter's part (reads are planned per parameter); one that does not fit any
 * piece is a bug in the caller, thrown as such. No element of the flat layout is allocated.
 */
export function retargetToPieces(
  reads: readonly PlannedRead[],
  pieces: readonly StatePiece[],
  buffer: string,
): PlannedRead[] {
  const sorted = pieces
    .filter((piece) => piece.values.length > 0)
    .sort((left, right) => left.offset - right.offset);
  return reads.map((read) => {
    if (read.byteLength === 0) return read;
    const numel = read.byteLength / 4;
    const piece = findPiece(sorted, read.targetOffset);
    if (piece === undefined || read.targetOffset + numel > piece.offset + piece.values.length) {
      throw new Error(
        `retargetToPieces: no '${buffer}' array holds elements ${read.targetOffset}..${read.targetOffset + numel} of the shard (${read.parameter}); the optimizer reader named too few.`,
      );
    }
    return { ...read, target: piece.values, targetOffset: read.targetOffset - piece.offset };
  });
}

/** The last piece starting at or before `offset` (binary search). */
function findPiece(sorted: readonly StatePiece[], offset: number): StatePiece | undefined {
  let low = 0;
  let high = sorted.length - 1;
  let found: StatePiece | undefined;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (sorted[middle]!.offset <= offset) {
      found = sorted[middle];
      low = middle + 1;
    } else high = middle - 1;
  }
  return found;
}

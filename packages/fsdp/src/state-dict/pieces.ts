import { FsdpError } from '../errors';

/** Elements [offset, offset + values.length) of a row-major parameter (or of one of its state buffers). */
export interface Piece {
  readonly offset: number;
  readonly values: Float32Array;
}

/**
 * Fills `target` with elements [start, start + target.length) of a parameter from `pieces`
 * (saved by ranks of any world size; overlaps, as from replicas, hold equal values). Throws
 * FsdpError('state-dict-mismatch') naming the parameter when some element is in no piece.
 */
export function assembleRange(
  name: string,
  pieces: readonly Piece[],
  start: number,
  target: Float32Array,
): void {
  const end = start + target.length;
  const covered: [number, number][] = [];
  for (const piece of pieces) {
    const from = Math.max(start, piece.offset);
    const to = Math.min(end, piece.offset + piece.values.length);
    if (to <= from) continue;
    target.set(piece.values.subarray(from - piece.offset, to - piece.offset), from - start);
    covered.push([from, to]);
  }
  covered.sort((a, b) => a[0] - b[0]);
  let reached = start;
  for (const [from, to] of covered) {
    if (from > reached) break;
    reached = Math.max(reached, to);
  }
  if (reached < end) {
    throw new FsdpError(
      `${name}: elements [${reached}, ${end}) are in none of the given shards (this rank needs [${start}, ${end})).`,
      {
        code: 'state-dict-mismatch',
        expected: { name, range: [start, end] },
        actual: pieces.map((piece) => [piece.offset, piece.offset + piece.values.length]),
        fix: 'pass the sharded state dicts of every rank that saved them (e.g. gathered from all ranks or read from every file of a checkpoint).',
      },
    );
  }
}

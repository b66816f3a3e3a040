import { FlatParamError } from './errors';
import { type FlatParamLayout, parameterIndex, withWorldSize } from './layout';

/** A piece of a parameter held by one rank: shard elements [offsetInShard, + length) of `rank`. */
export interface ShardPiece {
  readonly rank: number;
  readonly offsetInShard: number;
  readonly offsetInParam: number;
  readonly length: number;
}

/**
 * Where elements [start, start + length) (row-major) of a parameter live when the unit is sharded
 * over `worldSize` ranks (default: the layout's own world size): one piece per rank that holds
 * some of them, in rank order, covering the range exactly once. Needs only the layout (for
 * example `metadata()` read back from a checkpoint), not the Parameters: resharding a checkpoint
 * saved at one world size and loaded at another maps each parameter's range through this function
 * twice.
 */
export function locateParameterRange(
  layout: FlatParamLayout,
  parameter: string | number,
  start = 0,
  length?: number,
  worldSize: number = layout.worldSize,
): ShardPiece[] {
  const index = typeof parameter === 'string' ? parameterIndex(layout, parameter) : parameter;
  const entry = layout.parameters[index];
  if (entry === undefined) {
    throw new FlatParamError(`No parameter at index ${index}: the unit has ${layout.parameters.length}.`, {
      code: 'unknown-parameter',
      expected: `an index in [0, ${layout.parameters.length}) or a parameter name`,
      actual: parameter,
      fix: 'use a name from metadata().parameters[i].names.',
    });
  }
  const count = length ?? entry.numel - start;
  if (
    !Number.isSafeInteger(start) ||
    !Number.isSafeInteger(count) ||
    start < 0 ||
    count < 0 ||
    start + count > entry.numel
  ) {
    throw new FlatParamError(
      `Element range [${start}, ${start + count}) is outside parameter ${entry.names[0]} of ${entry.numel} elements.`,
      {
        code: 'invalid-argument',
        expected: `0 <= start <= start + length <= ${entry.numel}`,
        actual: { start, length: count },
        parameters: entry.names,
        fix: 'pass a row-major element range inside the parameter.',
      },
    );
  }
  const shardNumel = (worldSize === layout.worldSize ? layout : withWorldSize(layout, worldSize)).shardNumel;
  const pieces: ShardPiece[] = [];
  let flat = entry.offset + start;
  const end = flat + count;
  while (flat < end) {
    const rank = Math.floor(flat / shardNumel);
    const shardEnd = (rank + 1) * shardNumel;
    const pieceEnd = Math.min(end, shardEnd);
    pieces.push({
      rank,
      offsetInShard: flat - rank * shardNumel,
      offsetInParam: flat - entry.offset,
      length: pieceEnd - flat,
    });
    flat = pieceEnd;
  }
  return pieces;
}

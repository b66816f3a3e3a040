import { allocateShared, type ProcessGroup } from '@fsdp-ts/collectives';
import { FsdpError } from '../errors';
import type { FsdpUnit } from './fsdp-unit';

/** One line per parameter: unit, name, shape, dtype, frozen flag, in layout order. */
export function describeStructure(units: readonly FsdpUnit[]): string[] {
  return units.flatMap((unit) =>
    unit.handles.flatMap((handle) =>
      handle.layout.parameters.map(
        (entry) =>
          `unit '${unit.name}' ${entry.names.join('=')} [${entry.shape.join(', ')}] ${handle.layout.dtype}${entry.frozen ? ' frozen' : ''}`,
      ),
    ),
  );
}

/** 32-bit FNV-1a of a string: enough to tell structures apart; the message names the line. */
function hash(text: string): number {
  let value = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    value ^= text.charCodeAt(index);
    value = Math.imul(value, 0x01000193);
  }
  return value | 0;
}

function shared(length: number): Int32Array {
  return allocateShared(Int32Array, length);
}

/**
 * Every rank checks that every rank wraps the same structure (names, shapes, dtypes, order,
 * units). Two all-gathers: the line counts, then one hash per line. A difference fails on every
 * rank with the first differing line instead of hanging or training garbage.
 */
export function checkSameStructure(group: ProcessGroup, lines: readonly string[]): void {
  const size = group.size;
  if (size === 1) return;
  const counts = shared(size);
  const count = shared(1);
  count[0] = lines.length;
  group.allGather(counts, count).wait();
  const first = counts[0]!;
  if (!counts.every((value) => value === first)) {
    throw new FsdpError(
      `Ranks wrap different models: parameter counts per rank are [${Array.from(counts).join(', ')}].`,
      {
        code: 'structure-mismatch',
        rank: group.rank,
        expected: 'the same parameters on every rank',
        actual: Array.from(counts),
        fix: 'build the same model (same config) on every rank before wrapping it.',
      },
    );
  }
  const hashes = shared(first);
  lines.forEach((line, index) => {
    hashes[index] = hash(line);
  });
  const all = shared(first * size);
  group.allGather(all, hashes).wait();
  for (let index = 0; index < first; index++) {
    for (let rank = 0; rank < size; rank++) {
      if (all[rank * first + index] !== all[index]) {
        throw new FsdpError(
          `Ranks wrap different models: parameter ${index} differs between rank 0 and rank ${rank}; on rank ${group.rank} it is ${lines[index]}.`,
          {
            code: 'structure-mismatch',
            rank: group.rank,
            expected: 'the same name, shape, dtype and unit on every rank',
            actual: lines[index],
            fix: 'build the same model with the same wrap policy on every rank (compare this line with the other ranks’ errors).',
          },
        );
      }
    }
  }
}

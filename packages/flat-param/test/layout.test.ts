import {
  computeFlatParamLayout,
  FlatParamError,
  type FlatParamLayout,
  locateParameterRange,
  parseFlatParamMetadata,
  shardIntersection,
  withWorldSize,
} from '@fsdp-ts/flat-param';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { alignmentArbitrary, numelOf, shapeArbitrary, worldSizeArbitrary } from './support/fixtures';

function layoutOf(shapes: readonly number[][], worldSize: number, alignment: number): FlatParamLayout {
  return computeFlatParamLayout(
    shapes.map((shape, index) => ({ names: [`p${index}`], shape })),
    { dtype: 'float32', worldSize, alignment },
  );
}

const shapesArbitrary = fc.array(shapeArbitrary, { minLength: 0, maxLength: 10 });

describe('computeFlatParamLayout', () => {
  it('places parameters in order, aligned, without overlap, padded to a multiple of the world size', () => {
    fc.assert(
      fc.property(shapesArbitrary, worldSizeArbitrary, alignmentArbitrary, (shapes, worldSize, alignment) => {
        const layout = layoutOf(shapes, worldSize, alignment);
        let end = 0;
        layout.parameters.forEach((parameter, index) => {
          expect(parameter.numel).toBe(numelOf(shapes[index]!));
          expect(parameter.offset).toBeGreaterThanOrEqual(end);
          if (parameter.numel > 0) {
            expect(parameter.offset % alignment).toBe(0);
            expect(parameter.offset - end).toBeLessThan(alignment);
          }
          end = parameter.offset + parameter.numel;
        });
        expect(layout.totalNumel).toBe(end);
        expect(layout.paddedNumel % worldSize).toBe(0);
        expect(layout.paddedNumel - layout.totalNumel).toBeLessThan(worldSize);
        expect(layout.shardNumel * worldSize).toBe(layout.paddedNumel);
      }),
    );
  });

  it('intersections cover every element of every parameter exactly once, at the right flat index', () => {
    fc.assert(
      fc.property(shapesArbitrary, worldSizeArbitrary, alignmentArbitrary, (shapes, worldSize, alignment) => {
        const layout = layoutOf(shapes, worldSize, alignment);
        layout.parameters.forEach((parameter, index) => {
          const hits = new Array<number>(parameter.numel).fill(0);
          for (let rank = 0; rank < worldSize; rank++) {
            const piece = shardIntersection(layout, rank, index);
            if (piece.length === 0) {
              expect(piece).toEqual({ offsetInShard: 0, offsetInParam: 0, length: 0 });
              continue;
            }
            expect(piece.offsetInShard + piece.length).toBeLessThanOrEqual(layout.shardNumel);
            // Flat index of the piece's first element, seen from the shard and from the parameter.
            expect(rank * layout.shardNumel + piece.offsetInShard).toBe(
              parameter.offset + piece.offsetInParam,
            );
            for (let element = 0; element < piece.length; element++)
              hits[piece.offsetInParam + element]! += 1;
          }
          expect(hits.every((count) => count === 1)).toBe(true);
        });
      }),
    );
  });

  it('keeps offsets when re-sharded for another world size', () => {
    fc.assert(
      fc.property(shapesArbitrary, worldSizeArbitrary, worldSizeArbitrary, (shapes, first, second) => {
        const layout = layoutOf(shapes, first, 4);
        const other = withWorldSize(layout, second);
        expect(other).toEqual(layoutOf(shapes, second, 4));
        expect(other.parameters.map((parameter) => parameter.offset)).toEqual(
          layout.parameters.map((parameter) => parameter.offset),
        );
      }),
    );
  });

  it('handles an empty unit and an all-zero-size unit', () => {
    expect(layoutOf([], 3, 4)).toMatchObject({ totalNumel: 0, paddedNumel: 0, shardNumel: 0 });
    const zero = layoutOf([[0], [2, 0]], 2, 4);
    expect(zero.paddedNumel).toBe(0);
    expect(shardIntersection(zero, 1, 1).length).toBe(0);
  });

  it('rejects bad world sizes, alignments, shapes and duplicate names with a FlatParamError', () => {
    expect(() => layoutOf([[2]], 0, 1)).toThrow(FlatParamError);
    expect(() => layoutOf([[2]], 2, 0)).toThrow(/alignment must be a positive integer/);
    expect(() => layoutOf([[2, -1]], 2, 1)).toThrow(/invalid shape/);
    const duplicate = () =>
      computeFlatParamLayout(
        [
          { names: ['a'], shape: [1] },
          { names: ['a'], shape: [2] },
        ],
        { dtype: 'float32', worldSize: 1 },
      );
    expect(duplicate).toThrow(expect.objectContaining({ code: 'duplicate-name', parameters: ['a'] }));
    expect(() => shardIntersection(layoutOf([[2]], 2, 1), 2, 0)).toThrow(/Rank 2 is outside a world of 2/);
  });
});

describe('locateParameterRange', () => {
  const caseArbitrary = fc
    .tuple(fc.array(shapeArbitrary, { minLength: 1, maxLength: 8 }), worldSizeArbitrary, alignmentArbitrary)
    .chain(([shapes, worldSize, alignment]) =>
      fc.tuple(
        fc.constant(shapes),
        fc.constant(worldSize),
        fc.constant(alignment),
        worldSizeArbitrary,
        fc.nat({ max: shapes.length - 1 }),
        fc.nat(),
        fc.nat(),
      ),
    );

  it('maps any element range to the pieces that hold it, at the layout world size or another one', () => {
    fc.assert(
      fc.property(caseArbitrary, ([shapes, worldSize, alignment, otherWorldSize, index, first, second]) => {
        // Located from JSON metadata alone: no Parameters involved.
        const metadata = parseFlatParamMetadata(
          JSON.parse(JSON.stringify(layoutOf(shapes, worldSize, alignment))),
        );
        const numel = metadata.parameters[index]!.numel;
        const start = numel === 0 ? 0 : first % (numel + 1);
        const length = numel - start === 0 ? 0 : second % (numel - start + 1);
        const shardNumel = Math.ceil(metadata.totalNumel / otherWorldSize);
        const pieces = locateParameterRange(metadata, `p${index}`, start, length, otherWorldSize);
        const covered: number[] = [];
        for (const piece of pieces) {
          expect(piece.length).toBeGreaterThan(0);
          for (let element = 0; element < piece.length; element++) {
            // Independent reference: the flat index of the element, then its rank and shard offset.
            const flat = metadata.parameters[index]!.offset + piece.offsetInParam + element;
            expect(Math.floor(flat / shardNumel)).toBe(piece.rank);
            expect(flat % shardNumel).toBe(piece.offsetInShard + element);
            covered.push(piece.offsetInParam + element);
          }
        }
        expect(covered).toEqual(Array.from({ length }, (_, element) => start + element));
      }),
    );
  });

  it('by default covers the whole parameter, one piece per holding rank', () => {
    const layout = layoutOf([[3], [5, 5], [5]], 2, 1);
    expect(locateParameterRange(layout, 'p1')).toEqual([
      { rank: 0, offsetInShard: 3, offsetInParam: 0, length: 14 },
      { rank: 1, offsetInShard: 0, offsetInParam: 14, length: 11 },
    ]);
    expect(() => locateParameterRange(layout, 'p1', 20, 6)).toThrow(/outside parameter p1/);
    expect(() => locateParameterRange(layout, 'nope')).toThrow(
      expect.objectContaining({ code: 'unknown-parameter' }),
    );
  });
});

describe('parseFlatParamMetadata', () => {
  it('accepts a JSON round trip and rejects a tampered layout', () => {
    const layout = layoutOf([[2, 3], [], [4]], 3, 2);
    expect(parseFlatParamMetadata(JSON.parse(JSON.stringify(layout)))).toEqual(layout);
    const tampered = JSON.parse(JSON.stringify(layout));
    tampered.parameters[1].offset += 1;
    expect(() => parseFlatParamMetadata(tampered)).toThrow(
      expect.objectContaining({ code: 'invalid-metadata' }),
    );
    expect(() => parseFlatParamMetadata({ ...layout, version: 2 })).toThrow(/version 1/);
    expect(() => parseFlatParamMetadata(null)).toThrow(FlatParamError);
  });
});

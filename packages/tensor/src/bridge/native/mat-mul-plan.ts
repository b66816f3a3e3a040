import { TensorError } from '../../errors';

/**
 * [Note: matMul as BLAS calls]
 * tfjs's BatchMatMul computes out[..., M, N] = op(a)[..., M, K] · op(b)[..., K, N] with op a
 * transpose of the last two dims when the flag is set, and the leading (batch) dims broadcast
 * numpy-style. Every tfjs tensor is dense row-major, so a stored matrix [R, C] has leading
 * dimension C whether or not it is transposed: transposes become CBLAS flags, batch offsets
 * become pointer offsets, and nothing is ever copied or materialised.
 * When a's batches are all distinct, b is one matrix and a is not transposed, the batches are
 * stacked rows of one [batch·M, K] matrix, so the whole product is one sgemm call.
 */
export interface MatMulPlan {
  outShape: number[];
  m: number;
  n: number;
  k: number;
  transposeA: boolean;
  transposeB: boolean;
  /** Leading dimensions (elements) of a, b and out as stored. */
  lda: number;
  ldb: number;
  ldc: number;
  /** One entry per sgemm call: element offsets into a, b and out, and that call's row count. */
  calls: { aOffset: number; bOffset: number; outOffset: number; rows: number }[];
}

function product(values: readonly number[]): number {
  let result = 1;
  for (const value of values) result *= value;
  return result;
}

export function planMatMul(
  aShape: readonly number[],
  bShape: readonly number[],
  transposeA: boolean,
  transposeB: boolean,
): MatMulPlan {
  if (aShape.length < 2 || bShape.length < 2) {
    throw new TensorError(`matMul of shapes [${aShape}] and [${bShape}]: both need rank ≥ 2.`, {
      code: 'shape-mismatch',
      expected: 'rank ≥ 2 for both operands',
      actual: [aShape, bShape],
      fix: 'reshape a vector to [1, n] or [n, 1] first.',
    });
  }
  const aRows = aShape[aShape.length - 2]!;
  const aColumns = aShape[aShape.length - 1]!;
  const bRows = bShape[bShape.length - 2]!;
  const bColumns = bShape[bShape.length - 1]!;
  const m = transposeA ? aColumns : aRows;
  const k = transposeA ? aRows : aColumns;
  const kB = transposeB ? bColumns : bRows;
  const n = transposeB ? bRows : bColumns;
  if (k !== kB) {
    throw new TensorError(
      `matMul inner sizes differ: ${k} and ${kB} (shapes [${aShape}] and [${bShape}], transposeA ${transposeA}, transposeB ${transposeB}).`,
      {
        code: 'shape-mismatch',
        expected: `op(a) [..., M, K] and op(b) [..., K, N] with the same K`,
        actual: [aShape, bShape],
        fix: 'transpose one operand (or flip its transpose flag) so the inner sizes match.',
      },
    );
  }
  const aBatch = aShape.slice(0, -2);
  const bBatch = bShape.slice(0, -2);
  const outBatch = broadcastShape(aBatch, bBatch, aShape, bShape);
  const batchCount = product(outBatch);
  const aBatchCount = product(aBatch);
  const bBatchCount = product(bBatch);
  const plan: MatMulPlan = {
    outShape: [...outBatch, m, n],
    m,
    n,
    k,
    transposeA,
    transposeB,
    lda: Math.max(1, aColumns),
    ldb: Math.max(1, bColumns),
    ldc: Math.max(1, n),
    calls: [],
  };
  if (batchCount === 0 || m === 0 || n === 0) return plan;
  if (!transposeA && bBatchCount === 1 && aBatchCount === batchCount) {
    plan.calls.push({ aOffset: 0, bOffset: 0, outOffset: 0, rows: batchCount * m });
    return plan;
  }
  const aIndex = batchIndexer(aBatch, outBatch);
  const bIndex = batchIndexer(bBatch, outBatch);
  for (let batch = 0; batch < batchCount; batch++) {
    plan.calls.push({
      aOffset: aIndex(batch) * aRows * aColumns,
      bOffset: bIndex(batch) * bRows * bColumns,
      outOffset: batch * m * n,
      rows: m,
    });
  }
  return plan;
}

function broadcastShape(
  a: readonly number[],
  b: readonly number[],
  aShape: readonly number[],
  bShape: readonly number[],
): number[] {
  const rank = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let dim = 0; dim < rank; dim++) {
    const x = a[dim - (rank - a.length)] ?? 1;
    const y = b[dim - (rank - b.length)] ?? 1;
    if (x !== y && x !== 1 && y !== 1) {
      throw new TensorError(`matMul batch dims of [${aShape}] and [${bShape}] do not broadcast.`, {
        code: 'shape-mismatch',
        expected: 'batch dims that are equal or 1 (numpy broadcasting)',
        actual: [aShape, bShape],
        fix: 'reshape or tile the operands so their leading dims broadcast.',
      });
    }
    out.push(x === 1 ? y : x);
  }
  return out;
}

/** Maps a flat output batch index to the flat batch index of an operand with batch dims `own`. */
function batchIndexer(own: readonly number[], out: readonly number[]): (batch: number) => number {
  const ownCount = product(own);
  if (ownCount === 1) return () => 0;
  if (ownCount === product(out)) return (batch) => batch;
  const offset = out.length - own.length;
  return (batch) => {
    let remaining = batch;
    let index = 0;
    let stride = 1;
    for (let dim = out.length - 1; dim >= 0; dim--) {
      const size = out[dim]!;
      const coordinate = remaining % size;
      remaining = (remaining - coordinate) / size;
      const ownSize = own[dim - offset] ?? 1;
      if (dim >= offset) {
        index += (ownSize === 1 ? 0 : coordinate) * stride;
        stride *= ownSize;
      }
    }
    return index;
  };
}

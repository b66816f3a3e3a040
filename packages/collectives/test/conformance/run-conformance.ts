import {
  allocateShared,
  type CollectiveBuffer,
  CollectiveError,
  type ProcessGroup,
  type Work,
} from '../../src/index.js';
import type { ConformanceCase } from './cases.js';
import { expectedResult, fillInput, firstDifference, firstDifferingByte } from './reference.js';

export interface CaseOutcome {
  name: string;
  /** undefined when the result matched; otherwise the first wrong element. */
  failure?: string;
}

function allocate(testCase: ConformanceCase, length: number): CollectiveBuffer {
  if (testCase.arena) {
    const arena = { arena: true };
    if (testCase.dtype === 'float32') return allocateShared(Float32Array, length, arena);
    if (testCase.dtype === 'int32') return allocateShared(Int32Array, length, arena);
    return allocateShared(Uint16Array, length, arena);
  }
  const bytes = length * (testCase.dtype === 'bfloat16' ? 2 : 4);
  const memory = testCase.unshared ? new ArrayBuffer(bytes) : new SharedArrayBuffer(bytes);
  if (testCase.dtype === 'float32') return new Float32Array(memory);
  if (testCase.dtype === 'int32') return new Int32Array(memory);
  return new Uint16Array(memory);
}

async function finish(work: Work, testCase: ConformanceCase): Promise<void> {
  if (testCase.awaitIt) await work;
  else work.wait();
}

/** Runs one case on this rank and returns the buffer that holds its result. */
async function runCase(
  group: ProcessGroup,
  testCase: ConformanceCase,
): Promise<CollectiveBuffer | undefined> {
  const { rank, size } = group;
  const options = { dtype: testCase.dtype, wireDtype: testCase.wireDtype };
  const count = testCase.count;
  switch (testCase.kind) {
    case 'allReduce': {
      const buffer = allocate(testCase, count);
      fillInput(testCase, rank, buffer);
      await finish(group.allReduce(buffer, { ...options, op: testCase.reduceOp }), testCase);
      return buffer;
    }
    case 'allGather': {
      if (testCase.inPlace) {
        const output = allocate(testCase, count * size);
        const input = output.subarray(rank * count, (rank + 1) * count);
        fillInput(testCase, rank, input);
        await finish(group.allGather(output, input, options), testCase);
        return output;
      }
      const input = allocate(testCase, count);
      fillInput(testCase, rank, input);
      const output = allocate(testCase, count * size);
      await finish(group.allGather(output, input, options), testCase);
      return output;
    }
    case 'reduceScatter': {
      const input = allocate(testCase, count * size);
      fillInput(testCase, rank, input);
      const output = testCase.inPlace
        ? input.subarray(rank * count, (rank + 1) * count)
        : allocate(testCase, count);
      await finish(group.reduceScatter(output, input, { ...options, op: testCase.reduceOp }), testCase);
      return output;
    }
    case 'broadcast': {
      const buffer = allocate(testCase, count);
      fillInput(testCase, rank, buffer);
      await finish(group.broadcast(buffer, { ...options, root: testCase.root }), testCase);
      return buffer;
    }
    case 'barrier':
      await finish(group.barrier(), testCase);
      return undefined;
    case 'sendRecv': {
      const buffer = allocate(testCase, count);
      fillInput(testCase, rank, buffer);
      const dtype = { dtype: testCase.dtype };
      if (rank === 0) {
        for (let peer = 1; peer < size; peer++) await finish(group.send(buffer, peer, dtype), testCase);
        const received = allocate(testCase, count);
        received.set(buffer as never);
        for (let peer = 1; peer < size; peer++) await finish(group.recv(received, peer, dtype), testCase);
        return received;
      }
      const own = allocate(testCase, count);
      own.set(buffer as never);
      await finish(group.recv(buffer, 0, dtype), testCase);
      await finish(group.send(own, 0, dtype), testCase);
      return buffer;
    }
    default:
      return undefined;
  }
}

/**
 * An all-gather or reduce-scatter whose input and output overlap without being in place (both
 * views over one buffer, one element apart): undefined when the API refused it with a typed
 * error saying what it expected and how to fix it, else what went wrong.
 */
function refusedOverlap(group: ProcessGroup, testCase: ConformanceCase): string | undefined {
  const { size } = group;
  const count = testCase.count;
  const base = allocate(testCase, count * size + 1);
  const whole = base.subarray(0, count * size);
  const part = base.subarray(1, 1 + count);
  const options = { dtype: testCase.dtype };
  try {
    if (testCase.kind === 'allGather') group.allGather(whole, part, options).wait();
    else group.reduceScatter(part, whole, options).wait();
  } catch (error) {
    if (!(error instanceof CollectiveError)) return `threw ${String(error)}`;
    if (error.code !== 'invalid-argument') return `code ${error.code}, expected invalid-argument`;
    const fix = `.subarray(${group.rank} * ${count}, ${group.rank + 1} * ${count})`;
    if (!(error.fix ?? '').includes(fix)) return `fix ${error.fix} does not say ${fix}`;
    if (!String(error.expected).includes('in place')) return `expected ${String(error.expected)}`;
    if (!error.message.includes('overlaps')) return `message ${error.message}`;
    return undefined;
  }
  return 'the overlapping op was accepted';
}

/** Runs every case in order on this rank and checks each result against the reference. */
export async function runConformance(
  group: ProcessGroup,
  cases: readonly ConformanceCase[],
): Promise<CaseOutcome[]> {
  const outcomes: CaseOutcome[] = [];
  for (const testCase of cases) {
    let failure: string | undefined;
    try {
      if (testCase.overlap) {
        outcomes.push({ name: testCase.name, ...failed(group, refusedOverlap(group, testCase)) });
        continue;
      }
      const result = await runCase(group, testCase);
      if (testCase.inPlace && result !== undefined) {
        // The same op out of place, on the same inputs: the two results must be the same bytes.
        const outOfPlace = (await runCase(group, { ...testCase, inPlace: false }))!;
        const differs = firstDifferingByte(result, outOfPlace);
        if (differs !== undefined)
          failure = `in place differs from out of place at byte ${differs} (lengths ${result.byteLength}, ${outOfPlace.byteLength})`;
      }
      if (result !== undefined)
        failure ??= firstDifference(testCase.dtype, result, expectedResult(testCase, group.rank, group.size));
    } catch (error) {
      failure = `threw ${error instanceof Error ? error.message : String(error)}`;
    }
    outcomes.push({ name: testCase.name, ...failed(group, failure) });
  }
  return outcomes;
}

function failed(group: ProcessGroup, failure: string | undefined): { failure?: string } {
  return failure === undefined ? {} : { failure: `rank ${group.rank}: ${failure}` };
}

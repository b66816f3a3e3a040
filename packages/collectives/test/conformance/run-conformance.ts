import { allocateShared, type CollectiveBuffer, type ProcessGroup, type Work } from '../../src/index.js';
import type { ConformanceCase } from './cases.js';
import { decodeElement, expectedResult, fillInput } from './reference.js';

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
      const input = allocate(testCase, count);
      fillInput(testCase, rank, input);
      const output = allocate(testCase, count * size);
      await finish(group.allGather(output, input, options), testCase);
      return output;
    }
    case 'reduceScatter': {
      const input = allocate(testCase, count * size);
      fillInput(testCase, rank, input);
      const output = allocate(testCase, count);
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

/** Runs every case in order on this rank and checks each result against the reference. */
export async function runConformance(
  group: ProcessGroup,
  cases: readonly ConformanceCase[],
): Promise<CaseOutcome[]> {
  const outcomes: CaseOutcome[] = [];
  for (const testCase of cases) {
    let failure: string | undefined;
    try {
      const result = await runCase(group, testCase);
      const expected = expectedResult(testCase, group.rank, group.size);
      if (result !== undefined) {
        if (result.length !== expected.length)
          failure = `length ${result.length}, expected ${expected.length}`;
        for (let i = 0; i < result.length && failure === undefined; i++) {
          const actual = decodeElement(testCase.dtype, result[i]!);
          const want = expected.at(i);
          if (!Object.is(actual, want)) failure = `element ${i}: got ${actual}, expected ${want}`;
        }
      }
    } catch (error) {
      failure = `threw ${error instanceof Error ? error.message : String(error)}`;
    }
    outcomes.push(
      failure === undefined
        ? { name: testCase.name }
        : { name: testCase.name, failure: `rank ${group.rank}: ${failure}` },
    );
  }
  return outcomes;
}

import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { typescriptScriptArguments } from '../../../packages/collectives/test/helpers/rank-commands';
import { flatParameter } from '../src/flat-parameter';
import { optimizerOnViews } from '../src/optimizer-on-views';
import { viewsOverStorage } from '../src/views-over-storage';

const quiet = () => {};

it('views write through to one storage and a Parameter keeps its shape when re-pointed', () => {
  const result = viewsOverStorage(quiet);
  expect(result.storageValues).toEqual([1, 1, 1, 1, 5, 5, 5, 5, 1, 1, 1, 1]);
  expect(result.parameterShape).toEqual([3, 4]);
  expect(result.dataShape).toEqual([4]);
});

it('a flat parameter shards over two ranks and gathers back to the original values', () => {
  const result = flatParameter(quiet);
  expect(result.shards).toEqual([
    [1, 2, 3, 4],
    [5, 6, 7, 8],
  ]);
  expect(result.gathered).toEqual({ weightShape: [2, 3], weight: [1, 2, 3, 4, 5, 6], bias: [7, 8] });
  expect(result.shardedShape).toEqual([4]);
});

it('an optimizer over views steps exactly the viewed elements', () => {
  const { after } = optimizerOnViews(quiet);
  // x - 0.1 · g inside the views (elements 0, 1, 2, 4, 5); untouched elsewhere.
  const expected = [1 - 0.1, 1 - 0.2, 1 - 0.3, 1, 1 - 0.5, 1 - 0.6, 1, 1];
  after.forEach((value, index) => {
    expect(value).toBeCloseTo(expected[index]!, 6);
  });
});

it('runs end to end, including the all-reduce between two processes', async () => {
  const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
  const child = spawn(process.execPath, [...typescriptScriptArguments(), main], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  expect(code, log).toBe(0);
  expect(log).toContain('rank 0 of 2 (tcp): all-reduce sum = [3,30]');
  expect(log).toContain('rank 1 of 2 (tcp): all-reduce sum = [3,30]');
  expect(log).toContain('4. @fsdp-ts/optim');
});

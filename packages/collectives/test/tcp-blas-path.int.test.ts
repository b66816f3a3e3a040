/**
 * Which path the tcp data path's float32 sums take ([Note: blas reduce steps]), proven by the
 * per-process counts of reduce steps (blasReduceCounts), with exact results on both: OpenBLAS's
 * in-place add when it loads, the SIMD kernels with FSDP_TCP_BLAS=0. Where OpenBLAS is missing
 * the test says so and checks that the SIMD kernels ran; with FSDP_EXPECT_BLAS=1 (`.ci/run`, after
 * installing OpenBLAS) a missing library fails it.
 */
import { createRequire } from 'node:module';
import { loadNativeFloatAdd } from '@fsdp-ts/kernels';
import { describe, expect, it } from 'vitest';
import { runWithLauncher } from './helpers/run-with-launcher.js';

const tcpScript = new URL('./fixtures/tcp-rank.ts', import.meta.url);

function blasMissing(): string {
  if (process.platform !== 'linux') return `not Linux (${process.platform})`;
  let koffi: string;
  try {
    koffi = createRequire(import.meta.url).resolve('koffi');
  } catch {
    return 'koffi is not installed';
  }
  const loaded = loadNativeFloatAdd(koffi);
  return loaded.add === undefined ? loaded.reason : '';
}

interface PathReport {
  mismatches: string[];
  counts: { blas: number; simd: number };
}

async function run(
  size: number,
  blas: '0' | '1' | undefined,
  env: Record<string, string> = {},
): Promise<PathReport[]> {
  const result = await runWithLauncher(size, tcpScript, ['blas-path'], {
    timeoutMs: 90_000,
    env: { FSDP_TCP_NATIVE: '1', ...(blas === undefined ? {} : { FSDP_TCP_BLAS: blas }), ...env },
  });
  expect(result.code, result.output).toBe(0);
  return [...result.results.entries()].sort(([a], [b]) => a - b).map(([, report]) => report as PathReport);
}

describe.runIf(process.platform === 'linux')('tcp float32 sums: BLAS or SIMD', () => {
  const missing = blasMissing();

  it('OpenBLAS is there where CI installed it (FSDP_EXPECT_BLAS=1)', () => {
    if (missing !== '') console.warn(`the tcp BLAS reduce is not tested here: ${missing}`);
    if (process.env.FSDP_EXPECT_BLAS === '1') expect(missing, 'FSDP_EXPECT_BLAS=1').toBe('');
  });

  for (const size of [2, 3]) {
    it(`W=${size}: every float32 sum/avg reduce step runs on ${missing === '' ? 'OpenBLAS' : 'the SIMD kernels (no OpenBLAS)'} by default, exact`, async () => {
      const reports = await run(size, undefined);
      for (const report of reports) {
        expect(report.mismatches).toEqual([]);
        if (missing === '') {
          expect(report.counts.blas).toBeGreaterThan(0);
          expect(report.counts.simd).toBe(0);
        } else {
          expect(report.counts.blas).toBe(0);
          expect(report.counts.simd).toBeGreaterThan(0);
        }
      }
    }, 120_000);
  }

  it('W=2: without OpenBLAS (FSDP_BLAS_LIBRARY names no library) the SIMD kernels run, exact; FSDP_TCP_BLAS=1 then fails the start, saying why', async () => {
    const missingLibrary = { FSDP_BLAS_LIBRARY: '/nonexistent/libopenblas.so.0' };
    for (const report of await run(2, undefined, missingLibrary)) {
      expect(report.mismatches).toEqual([]);
      expect(report.counts.blas).toBe(0);
      expect(report.counts.simd).toBeGreaterThan(0);
    }
    const required = await runWithLauncher(2, tcpScript, ['blas-path'], {
      timeoutMs: 90_000,
      env: { FSDP_TCP_NATIVE: '1', FSDP_TCP_BLAS: '1', ...missingLibrary },
    });
    expect(required.code).not.toBe(0);
    expect(required.output).toMatch(/FSDP_TCP_BLAS=1, but OpenBLAS's cblas_saxpy could not load/);
    expect(required.output).toMatch(/nonexistent/);
  }, 120_000);

  it('W=3: FSDP_TCP_BLAS=0 runs the SIMD kernels, exact', async () => {
    for (const report of await run(3, '0')) {
      expect(report.mismatches).toEqual([]);
      expect(report.counts.blas).toBe(0);
      expect(report.counts.simd).toBeGreaterThan(0);
    }
  }, 120_000);
});

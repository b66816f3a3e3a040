import { spawnThreadRanks } from '../../src/index.js';
import { runWithLauncher } from '../helpers/run-with-launcher.js';
import { runWithMpirun } from '../helpers/run-with-mpirun.js';
import type { SuiteOptions } from './rank-suite.js';
import type { CaseOutcome } from './run-conformance.js';

/**
 * How the conformance suite starts one backend's ranks, with that backend's real set-up: real
 * processes under fsdp-run for tcp, worker threads for the thread backends. Every registered
 * backend needs an entry (conformance.int.test.ts fails for one without).
 */
export interface ConformanceLauncher {
  /** 'process(es)' or 'thread rank(s)', for the test names. */
  readonly ranks: string;
  /** Each rank's outcomes, by rank. */
  run(size: number): Promise<CaseOutcome[][]>;
  /** At least this many outcomes on rank 0 (the suite really ran). */
  readonly minimumCases: number;
  /** The world sizes it runs at; default 1 to 4. */
  readonly sizes?: readonly number[];
}

const threadFixture = new URL('../fixtures/conformance-thread-rank.ts', import.meta.url);
const tcpScript = new URL('../fixtures/tcp-rank.ts', import.meta.url);
const timeoutMs = 170_000;

function threads(
  backend: string,
  options: (size: number) => SuiteOptions,
  minimumCases: number,
): ConformanceLauncher {
  return {
    ranks: 'thread rank(s)',
    minimumCases,
    run: async (size) =>
      (await spawnThreadRanks(size, threadFixture, 'conformanceRank', {
        args: { backend, ...options(size) },
        timeoutMs,
      })) as CaseOutcome[][],
  };
}

/**
 * tcp ranks under fsdp-run. `FSDP_TCP_NATIVE`: '1' requires the native data path (koffi, Linux;
 * a rank fails to start without it, so the suite cannot pass on node:net by accident), '0' forces
 * node:net (the fallback when koffi is missing). The native suite adds float32 sums with OpenBLAS
 * when it loads (the default); tcp-blas-path.int.test.ts proves which path ran. `FSDP_TCP_LOCAL`
 * ([Note: local peer sockets]): unset, the ranks (one host) connect over Unix-domain sockets;
 * 'tcp' keeps them on TCP loopback (local-peer-sockets.int.test.ts proves which ran).
 */
export function tcpLauncher(native: '0' | '1' | undefined, local?: 'tcp'): ConformanceLauncher {
  return {
    ranks: 'process(es) under fsdp-run',
    minimumCases: 50,
    run: async (size) => {
      // With OpenBLAS installed (FSDP_EXPECT_BLAS=1, CI), the native path must add float32 sums
      // with it ([Note: blas reduce steps]): a rank fails to start if it cannot load.
      const blas = native === '1' && process.env.FSDP_EXPECT_BLAS === '1' ? { FSDP_TCP_BLAS: '1' } : {};
      const run = await runWithLauncher(size, tcpScript, ['conformance'], {
        timeoutMs,
        env: {
          ...(native === undefined ? {} : { FSDP_TCP_NATIVE: native, ...blas }),
          ...(local === undefined ? {} : { FSDP_TCP_LOCAL: local }),
        },
      });
      if (run.code !== 0 || run.results.size !== size) {
        throw new Error(`fsdp-run exited with ${run.code} and ${run.results.size} results:\n${run.output}`);
      }
      return [...run.results.entries()]
        .sort(([a], [b]) => a - b)
        .map(([, result]) => result as CaseOutcome[]);
    },
  };
}

/**
 * mpi ranks: real processes under mpirun (Open MPI), at W=2 and 3 (each size is one mpirun job;
 * the thread and tcp suites cover the world sizes). Each rank also runs the mpi backend's own
 * cases (test/fixtures/mpi-rank.ts): an mpirun job defaults to mpi, a stalled peer is named.
 */
const mpiLauncher: ConformanceLauncher = {
  ranks: 'process(es) under mpirun',
  minimumCases: 50,
  sizes: [2, 3],
  run: async (size) => {
    const run = await runWithMpirun(size, new URL('../fixtures/mpi-rank.ts', import.meta.url), [], {
      timeoutMs,
    });
    if (run.code !== 0 || run.results.size !== size)
      throw new Error(`mpirun exited with ${run.code} and ${run.results.size} results:\n${run.output}`);
    return [...run.results.entries()].sort(([a], [b]) => a - b).map(([, result]) => result as CaseOutcome[]);
  },
};

export const conformanceLaunchers: Readonly<Record<string, ConformanceLauncher>> = {
  tcp: tcpLauncher(process.platform === 'linux' ? '1' : undefined),
  shm: threads('shm', (size) => ({ huge: size === 2 || size === 3, wire: false }), 40),
  // The test-only backend of test/support/loopback-backend, built by following CONTRIBUTING.md's
  // "Add a collectives backend" recipe: registered from outside the package, engine on EngineBase.
  loopback: threads('loopback', (size) => ({ huge: size === 2, wire: true }), 60),
  mpi: mpiLauncher,
};

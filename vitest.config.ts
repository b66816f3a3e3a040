import { availableParallelism } from 'node:os';
import { relative } from 'node:path';
import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { testRanksFrom } from './scripts/build-stamp';

// Tests run against each package's source through the `@fsdp-ts/source` export condition, so
// editing one package never needs a rebuild to test another.
const conditions = ['@fsdp-ts/source', 'node', 'import', 'default'];

// [Note: suite schedule] (architecture/performance.md, "The test suite")
// Most of the suite's time is spent in files that start processes and wait on them (launches,
// npm installs, timeouts that detect a failure), so one file at a time leaves a core idle much of
// the time. vitest's default in `run` mode is one worker fewer than the cores: one worker on the
// 2-core machines this project is tested on. The suite runs one file per core instead, at
// least two. With two workers the suite ends when the longest file does, if the longest files
// start first: vitest orders a fresh clone (no results cache) by file size, which would start
// short files that run for minutes (conformance.int.test.ts is 49 lines) last. So the files
// below start first, longest first; the rest follow in
// vitest's own order (its cached durations where it has them, longest first, else the largest
// file first). A file missing from the list only starts later; nothing here changes what runs.
// The order is that of the files' durations in the whole suite (vitest's JSON reporter, the
// suite on 2 workers, 2026-12-04): installed-app 96 s, then 37 down to 13 s.
const longestFirst = [
  'packages/fsdp-ts/test/installed-app.int.test.ts',
  'packages/fsdp/test/elastic.int.test.ts',
  'packages/fsdp/test/parity.int.test.ts',
  'packages/fsdp/test/slurm-cluster.int.test.ts',
  'packages/layers/test/parity.int.test.ts',
  'packages/collectives/test/conformance-shm.int.test.ts',
  'packages/fsdp/test/step-failure.int.test.ts',
  'packages/collectives/test/conformance-tcp-paths.int.test.ts',
  'packages/collectives/test/failures.int.test.ts',
  'packages/fsdp/test/multi-host.int.test.ts',
  'packages/fsdp/test/robustness.int.test.ts',
  'packages/fsdp/test/offload.int.test.ts',
  'packages/collectives/test/conformance.int.test.ts',
  'packages/collectives/test/job-end.int.test.ts',
  'packages/fsdp/test/state-control.int.test.ts',
  'packages/collectives/test/tcp-native-headers.int.test.ts',
  'examples/train-gpt/test/train-gpt.int.test.ts',
  'packages/collectives/test/conformance-mpi.int.test.ts',
  'packages/fsdp-ts/test/api-reference.test.ts',
];

class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (file: TestSpecification) => {
      const index = longestFirst.indexOf(relative(this.ctx.config.root, file.moduleId));
      return index === -1 ? longestFirst.length : index;
    };
    // Array.prototype.sort is stable: files off the list keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}

const testFiles = [
  'packages/*/src/**/*.test.ts',
  'packages/*/test/**/*.test.ts',
  'examples/*/test/**/*.test.ts',
  'bench/**/*.test.ts',
  'scripts/**/*.test.ts',
];
const integrationFiles = testFiles.map((pattern) => pattern.replace(/\*\.test\.ts$/, '*.int.test.ts'));

// [Note: build stamp] (scripts/build-stamp.ts): the processes tests start (launches, scripts,
// mpirun ranks) load the packages' builds when `npm run build` stamped them as the builds of the
// sources on disk, else the sources through tsx; test/helpers/rank-commands.ts in collectives
// reads the choice. FSDP_TEST_RANKS=source forces the sources.
const ranksFrom = testRanksFrom();
process.env.FSDP_TEST_RANKS = ranksFrom;

// [Note: unit files share their workers] Each test file run in a fresh module graph imports
// tfjs and the packages' sources again: about 0.7 CPU-seconds per file, as much as many unit
// files' tests. The unit files (not *.int.test.ts) therefore run without isolation (vitest's
// `isolate: false`): a worker keeps the modules it has evaluated for the next unit file, as
// one process would. A unit file leaves the state it changes as it found it (environment
// variables are restored; a backend or kernel registration is the same for every file). The
// integration files start processes, servers and thread ranks and register test-only backends:
// each keeps a module graph of its own.

const shared = {
  pool: 'forks',
  env: { FSDP_TEST_RANKS: ranksFrom },
  testTimeout: 180_000,
  hookTimeout: 180_000,
} as const;

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@fsdp-ts/source'] } },
  test: {
    maxWorkers: Math.max(2, availableParallelism()),
    sequence: { sequencer: LongestFirstSequencer },
    ...shared,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: testFiles,
          exclude: [...configDefaults.exclude, '**/*.int.test.ts'],
          isolate: false,
          ...shared,
        },
      },
      {
        extends: true,
        test: { name: 'integration', include: integrationFiles, ...shared },
      },
    ],
  },
});

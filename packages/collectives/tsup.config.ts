import { defineConfig } from 'tsup';

export default defineConfig({
  // The fsdp-run bin is built beside the library (dist/bin/fsdp-run.js, ESM, with its hashbang).
  // The communication worker and the thread-rank entry are worker-thread entries loaded by URL
  // next to dist/index.js (see [Note: worker entries] in src/internal/start-worker.ts).
  entry: {
    index: 'src/index.ts',
    'bin/fsdp-run': 'src/bin/fsdp-run.ts',
    'comm-worker': 'src/internal/comm-worker.ts',
    'thread-rank-entry': 'src/internal/thread-rank-entry.ts',
  },
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
});

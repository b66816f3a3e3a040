import { defineConfig } from 'tsup';
import { declarationOptions } from '../../scripts/declaration-options';

const shared = { clean: false, target: 'node20' } as const;

export default defineConfig([
  // ESM: the library, the fsdp-run bin (dist/bin/fsdp-run.js, with its hashbang) and the
  // worker-thread entries loaded by URL next to dist/index.js (see [Note: worker entries] in
  // src/internal/start-worker.ts), sharing chunks.
  {
    ...shared,
    entry: {
      index: 'src/index.ts',
      'bin/fsdp-run': 'src/bin/fsdp-run.ts',
      'comm-worker': 'src/internal/comm-worker.ts',
      'thread-rank-entry': 'src/internal/thread-rank-entry.ts',
    },
    format: ['esm'],
    dts: declarationOptions({ entry: { index: 'src/index.ts' } }),
  },
  // CommonJS: the library only. It starts the same ESM worker files; the bin is ESM. No second
  // declaration pass: its index.d.cts would be the same bytes as index.d.ts (one rolled-up file,
  // no imports of chunks), so the package's build script copies it (a declaration pass is most
  // of this package's build time).
  { ...shared, entry: { index: 'src/index.ts' }, format: ['cjs'] },
]);

import { defineConfig } from 'tsup';

export default defineConfig({
  // The fsdp-run bin is built beside the library (dist/bin/fsdp-run.js, ESM, with its hashbang).
  entry: { index: 'src/index.ts', 'bin/fsdp-run': 'src/bin/fsdp-run.ts' },
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'node20',
});

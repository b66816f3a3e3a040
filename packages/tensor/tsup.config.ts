import { defineConfig } from 'tsup';
import { declarationOptions } from '../../scripts/declaration-options';

const shared = { format: ['esm', 'cjs'], clean: false, target: 'node20' } as const;

export default defineConfig([
  // The package's two entries, `.` and `./internal` (architecture/decisions/2026-12-02-public-surfaces.md),
  // share their modules through chunks in both formats (`splitting`), so both see one Storage class
  // and one BLAS loader.
  {
    ...shared,
    entry: { index: 'src/index.ts', internal: 'src/internal/index.ts' },
    splitting: true,
    shims: true,
    dts: declarationOptions(),
    external: ['#register-all-gradients'],
  },
  // [Note: gradient registration] in src/bridge/register-all-gradients.ts: tfjs-core's gradient and
  // chained-op registration is bundled into its own entry (it is written for bundlers, not for
  // Node) and loaded lazily by initBackend through the package's `#register-all-gradients` import.
  // No source map: it would only repeat tfjs-core's code.
  {
    ...shared,
    entry: { 'register-all-gradients': 'src/bridge/register-all-gradients.ts' },
    noExternal: [/^@tensorflow\/tfjs-core\/dist\//],
  },
]);

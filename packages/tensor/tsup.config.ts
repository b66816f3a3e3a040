import { defineConfig } from 'tsup';

const shared = { format: ['esm', 'cjs'], clean: false, target: 'node20' } as const;

export default defineConfig([
  {
    ...shared,
    entry: { index: 'src/index.ts' },
    dts: true,
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

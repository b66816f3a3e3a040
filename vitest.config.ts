import { defineConfig } from 'vitest/config';

// Tests run against each package's source through the `@fsdp-ts/source` export condition, so
// editing one package never needs a rebuild to test another.
const conditions = ['@fsdp-ts/source', 'node', 'import', 'default'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['@fsdp-ts/source'] } },
  test: {
    include: [
      'packages/*/src/**/*.test.ts',
      'packages/*/test/**/*.test.ts',
      'examples/*/test/**/*.test.ts',
      'bench/**/*.test.ts',
    ],
    pool: 'forks',
    testTimeout: 180_000,
    hookTimeout: 180_000,
  },
});

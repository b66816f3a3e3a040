import { defineConfig } from 'tsup';
import { declarationOptions } from '../../scripts/declaration-options';

export default defineConfig({
  entry: { index: 'src/index.ts', internal: 'src/internal/index.ts' },
  format: ['esm', 'cjs'],
  dts: declarationOptions(),
  clean: true,
  target: 'node20',
});

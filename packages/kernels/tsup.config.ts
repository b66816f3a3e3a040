import { defineConfig } from 'tsup';
import { declarationOptions } from '../../scripts/declaration-options';

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: declarationOptions(),
  clean: true,
  target: 'node20',
});

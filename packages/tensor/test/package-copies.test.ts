import { describe, expect, it } from 'vitest';
import { explainForeignParameter, Parameter } from '../src/index';
import { loadedTensorCopies } from '../src/package-copies';

// The real two-copy case (ESM and CommonJS builds in one process) runs against the packed packages
// in packages/fsdp-ts/test/installed-app.int.test.ts.
describe('duplicate package copies', () => {
  it('records where this copy was loaded from', () => {
    expect(loadedTensorCopies().some((location) => location.includes('packages/tensor/src/'))).toBe(true);
  });

  it('explains nothing for this copy’s Parameters or for other values', () => {
    expect(explainForeignParameter(Parameter.fromArray([1, 2], [2]))).toBeUndefined();
    expect(explainForeignParameter({ params: [] })).toBeUndefined();
    expect(explainForeignParameter(null)).toBeUndefined();
    expect(explainForeignParameter(3)).toBeUndefined();
  });
});

import { describe, expect, it } from 'vitest';
import { FsdpTsError } from '../src/index';

class PackageError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.PackageError';
  readonly code: string;
  constructor(message: string, code: string) {
    super(message, { expected: 1, actual: 2, fix: 'do it right.' });
    this.code = code;
  }
}

class SpecificError extends PackageError {
  static override readonly marker: string = 'fsdp-ts.error.SpecificError';
}

class Unmarked extends PackageError {}

/** What another copy of the same package would define: same markers, different classes. */
function otherCopy() {
  class PackageErrorCopy extends Error {
    constructor() {
      super('from the other copy');
      Object.defineProperty(this, Symbol.for('fsdp-ts.error'), { value: true });
      Object.defineProperty(this, Symbol.for('fsdp-ts.error.PackageError'), { value: true });
    }
  }
  return new PackageErrorCopy();
}

describe('FsdpTsError', () => {
  it('states the fix in the message and keeps the typed fields', () => {
    const error = new PackageError('Bad input.', 'invalid');
    expect(error.message).toBe('Bad input. Fix: do it right.');
    expect(error.name).toBe('PackageError');
    expect([error.expected, error.actual, error.fix, error.code]).toEqual([1, 2, 'do it right.', 'invalid']);
  });

  it('recognises instances by marker: a class and its ancestors, not its siblings or descendants', () => {
    const specific = new SpecificError('x', 'c');
    const plain = new PackageError('x', 'c');
    expect(SpecificError.isInstance(specific) && PackageError.isInstance(specific)).toBe(true);
    expect(FsdpTsError.isInstance(specific)).toBe(true);
    expect(SpecificError.isInstance(plain)).toBe(false);
    expect(plain instanceof SpecificError).toBe(false);
    expect(specific instanceof PackageError).toBe(true);
    expect(FsdpTsError.isInstance(new Error('plain'))).toBe(false);
    expect(FsdpTsError.isInstance(null)).toBe(false);
  });

  it('recognises an error thrown by another copy of the package, by isInstance and instanceof', () => {
    const foreign = otherCopy();
    expect(PackageError.isInstance(foreign)).toBe(true);
    expect(foreign instanceof PackageError).toBe(true);
    expect(foreign instanceof SpecificError).toBe(false);
  });

  it('a subclass without its own marker falls back to the prototype check', () => {
    expect(new Unmarked('x', 'c') instanceof Unmarked).toBe(true);
    expect(new PackageError('x', 'c') instanceof Unmarked).toBe(false);
  });
});

/**
 * Errors of @fsdp-ts/nn. Every message says what was expected, what came, and how to fix it; the
 * same facts are on typed fields so callers can branch on them.
 */
import { FsdpTsError } from '@fsdp-ts/errors';

/** What went wrong, as an NnError's `code`. */
export type NnErrorCode =
  | 'invalid-argument'
  /** An options object has a key its interface does not declare (see [Note: option keys] in @fsdp-ts/errors). */
  | 'unknown-option'
  | 'duplicate-name'
  | 'shape-mismatch'
  | 'state-dict-mismatch'
  | 'parameter-not-full-shape'
  | 'parameter-deferred'
  | 'loss-not-scalar';

/** The typed fields an NnError carries. */
export interface NnErrorDetails {
  code: NnErrorCode;
  expected?: unknown;
  actual?: unknown;
  fix?: string;
  cause?: unknown;
}

export class NnError extends FsdpTsError {
  static override readonly marker: string = 'fsdp-ts.error.NnError';
  readonly code: NnErrorCode;

  constructor(message: string, details: NnErrorDetails) {
    super(message, details);
    this.name = 'NnError';
    this.code = details.code;
  }
}

/** One parameter whose shape in a state dict differs from the module's. */
export interface StateDictShapeMismatch {
  key: string;
  expected: readonly number[];
  actual: readonly number[];
}

/** `loadStateDict` found keys or shapes that do not match the module; lists every problem at once. */
export class StateDictError extends NnError {
  static override readonly marker: string = 'fsdp-ts.error.StateDictError';
  readonly missingKeys: readonly string[];
  readonly unexpectedKeys: readonly string[];
  readonly shapeMismatches: readonly StateDictShapeMismatch[];

  constructor(
    missingKeys: readonly string[],
    unexpectedKeys: readonly string[],
    shapeMismatches: readonly StateDictShapeMismatch[],
  ) {
    const lines: string[] = [];
    if (missingKeys.length > 0) lines.push(`missing keys: ${missingKeys.join(', ')}`);
    if (unexpectedKeys.length > 0) lines.push(`unexpected keys: ${unexpectedKeys.join(', ')}`);
    for (const { key, expected, actual } of shapeMismatches) {
      lines.push(`shape mismatch for ${key}: expected [${expected.join(', ')}], got [${actual.join(', ')}]`);
    }
    super(`loadStateDict: the state dict does not match the module (${lines.join('; ')}).`, {
      code: 'state-dict-mismatch',
      expected: 'exactly the keys and shapes of module.stateDict()',
      actual: { missingKeys, unexpectedKeys, shapeMismatches },
      fix: 'load a state dict saved from the same architecture, or pass { strict: false } to skip missing and unexpected keys.',
    });
    this.name = 'StateDictError';
    this.missingKeys = missingKeys;
    this.unexpectedKeys = unexpectedKeys;
    this.shapeMismatches = shapeMismatches;
  }
}

/**
 * [Note: errors across package copies]
 * An application can load two copies of a package (two versions, or its ESM and CJS builds), and
 * `error instanceof CollectiveError` is then false for an error thrown by the other copy. So every
 * fsdp-ts error class declares a static `marker` ('fsdp-ts.error.<ClassName>'), and its
 * instances carry a property keyed by `Symbol.for(marker)` for their class and every fsdp-ts
 * ancestor; registered symbols are shared by every copy. `X.isInstance(value)` checks X's marker,
 * and so does `instanceof` (`Symbol.hasInstance`), whichever copy threw. A class that declares
 * no marker of its own falls back to the ordinary prototype check.
 */

/** The facts every fsdp-ts error states besides its message. */
export interface FsdpTsErrorDetails {
  /** What the code expected. */
  expected?: unknown;
  /** What came instead. */
  actual?: unknown;
  /** How to fix it (appended to the message as " Fix: …"). */
  fix?: string;
  /** The error that led to this one (set as the standard `Error.cause`). */
  cause?: unknown;
}

type ErrorClass = abstract new (...args: never[]) => FsdpTsError;

/** The base of every fsdp-ts error class (CollectiveError, TensorError, FsdpError, …). */
export class FsdpTsError extends Error {
  /** The class's marker (see [Note: errors across package copies]); every subclass declares its own. */
  static readonly marker: string = 'fsdp-ts.error';
  /** What the code expected (from the details). */
  readonly expected: unknown;
  /** What came instead (from the details). */
  readonly actual: unknown;
  /** How to fix it; the message ends with it as " Fix: …". */
  readonly fix: string | undefined;

  constructor(message: string, details: FsdpTsErrorDetails = {}) {
    const fix = details.fix === undefined ? '' : ` Fix: ${details.fix}`;
    super(`${message}${fix}`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.expected = details.expected;
    this.actual = details.actual;
    this.fix = details.fix;
    for (
      let type: unknown = new.target;
      typeof type === 'function' && type !== Error;
      type = Object.getPrototypeOf(type)
    ) {
      if (Object.hasOwn(type, 'marker')) {
        Object.defineProperty(this, Symbol.for((type as typeof FsdpTsError).marker), { value: true });
      }
    }
  }

  /** Whether `value` is an instance of this class, from any copy of its package. */
  static isInstance<T extends ErrorClass>(this: T, value: unknown): value is InstanceType<T> {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass called on; its marker decides.
    return hasMarker(this, value);
  }

  /**
   * True for an instance of this class from any copy of the package (matched by its `Symbol.for` marker),
   * so `instanceof` works across duplicate installs.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the subclass called on; its marker decides.
    return hasMarker(this, value);
  }
}

function hasMarker(type: unknown, value: unknown): boolean {
  if (!Object.hasOwn(type as object, 'marker')) {
    return Function.prototype[Symbol.hasInstance].call(type, value);
  }
  const key = Symbol.for((type as typeof FsdpTsError).marker);
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[key] === true;
}

/** Checks an internal invariant; see `invariantCheck`. */
export type InvariantCheck = (
  condition: unknown,
  message: string,
  values?: Record<string, unknown>,
) => asserts condition;

/**
 * An `assert` for a package's internal invariants: a failure is a bug in fsdp-ts, not a user
 * error, so it throws `<what> invariant broken: <message> <values as JSON>. Please report this.`
 */
export function invariantCheck(what: string): InvariantCheck {
  return (condition, message, values) => {
    if (condition) return;
    const detail = values === undefined ? '' : ` ${JSON.stringify(values)}`;
    throw new Error(`${what} invariant broken: ${message}${detail}. Please report this.`);
  };
}

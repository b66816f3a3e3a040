/**
 * [Note: option keys]
 * Every options object of the public API is checked at run time against the keys its interface
 * declares: a key it does not declare (a typo, PyTorch's snake_case name, another library's
 * spelling) is an error, even when its value is undefined, instead of being silently ignored.
 * The error names the nearest known key, or, for a name another library uses, what fsdp-ts calls
 * it (`ForeignNames`: PyTorch FSDP's `sharding_strategy`, torchrun's `--nproc_per_node`, …).
 *
 * Each package keeps the list beside its interface as
 * `export const xOptionKeys = { … } as const satisfies OptionKeys<X>;`: the compiler then fails
 * when the interface gains a key the list lacks, or the list names a key the interface does not
 * have, so the two cannot drift. Each package throws its own error base (code 'unknown-option';
 * the optimizers' hyperparameters keep 'unknown-hyperparameter') through `checkOptionKeys`.
 * Objects documented as open (user metadata, a script's own arguments) are not checked.
 */

/** Exactly the keys of `T`, each `true`: `{ … } as const satisfies OptionKeys<T>`. */
export type OptionKeys<T> = { readonly [K in keyof Required<T>]: true };

/**
 * Names another library uses for an option, each with what to write in fsdp-ts instead (a
 * sentence: "shardingStrategy: 'full-shard' | …", or "no equivalent: …"). Looked up by the exact
 * name and by its normalized form (case, '_' and '-' ignored), so `useOrigParams` finds the
 * advice for `use_orig_params`.
 */
export type ForeignNames = Readonly<Record<string, string>>;

/** What an unknown-option error states (the fields of FsdpTsErrorDetails it fills). */
export interface UnknownOptionDetails {
  /** The known keys. */
  expected: readonly string[];
  /** The unknown keys, in the order the options object lists them. */
  actual: readonly string[];
  fix: string;
}

/** Builds the package's own error from the message and details (see [Note: option keys]). */
export type UnknownOptionErrorFactory = (message: string, details: UnknownOptionDetails) => Error;

/**
 * Throws `createError(…)` when `options` (a plain object; anything else is left to the caller's
 * own validation) has a key outside `known`. `where` names the entry point in the message
 * ("FullyShardedDataParallel", "AdamW", "param group 1 of AdamW").
 */
export function checkOptionKeys(
  where: string,
  options: unknown,
  known: Readonly<Record<string, true>> | readonly string[],
  foreign: ForeignNames,
  createError: UnknownOptionErrorFactory,
): void {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) return;
  const knownNames = Array.isArray(known) ? (known as readonly string[]) : Object.keys(known);
  const unknown = Object.keys(options).filter((key) => !knownNames.includes(key));
  if (unknown.length === 0) return;
  const problems = unknown.map((key) => `'${key}' (${adviceForName(key, knownNames, foreign)})`);
  const noun = unknown.length === 1 ? 'an unknown option' : 'unknown options';
  throw createError(`${where} got ${noun}: ${problems.join('; ')}.`, {
    expected: knownNames,
    actual: unknown,
    fix: `rename or remove ${unknown.length === 1 ? 'it' : 'them'}; the known options are ${knownNames.join(', ')}.`,
  });
}

/**
 * What to say about an unknown `name`: the foreign name's advice, else "did you mean 'x'?" for
 * the nearest known name, else that no known name is close.
 */
export function adviceForName(name: string, known: readonly string[], foreign: ForeignNames = {}): string {
  const advice = foreignAdvice(name, foreign);
  if (advice !== undefined) return advice;
  const nearest = nearestName(name, known);
  return nearest === undefined ? 'no known option is close to it' : `did you mean '${nearest}'?`;
}

function foreignAdvice(name: string, foreign: ForeignNames): string | undefined {
  if (Object.hasOwn(foreign, name)) return foreign[name];
  const normalized = normalizeName(name);
  for (const [foreignName, advice] of Object.entries(foreign)) {
    if (normalizeName(foreignName) === normalized) return advice;
  }
  return undefined;
}

/**
 * The candidate closest to `name`: one equal but for case, '_' and '-' first (`weight_decay` →
 * `weightDecay`, `--nproc_per_node` → `--nproc-per-node`), else the one with the smallest edit
 * distance (a swap of neighbours counts one) if that is at most a third of the name's length (at least 1, at most 3), else the
 * shortest one that `name` (3 characters or more) begins (`minLr` → `minLrRatio`), else the
 * longest one (3 characters or more) that begins `name` (`keepLast` → `keep`).
 */
export function nearestName(name: string, candidates: readonly string[]): string | undefined {
  const normalized = normalizeName(name);
  const same = candidates.find((candidate) => normalizeName(candidate) === normalized);
  if (same !== undefined) return same;
  const limit = Math.min(3, Math.max(1, Math.floor(normalized.length / 3)));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of candidates) {
    const distance = editDistance(normalized, normalizeName(candidate));
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  if (best !== undefined || normalized.length < 3) return best;
  const extended = candidates.filter((candidate) => normalizeName(candidate).startsWith(normalized));
  if (extended.length > 0) return extended.sort((a, b) => a.length - b.length)[0];
  const prefixes = candidates.filter((candidate) => {
    const known = normalizeName(candidate);
    return known.length >= 3 && normalized.startsWith(known);
  });
  return prefixes.sort((a, b) => b.length - a.length)[0];
}

/** Lower case, without leading dashes, '_' and '-': the form names are compared in. */
export function normalizeName(name: string): string {
  return name.replace(/^-+/, '').replace(/[-_]/g, '').toLowerCase();
}

/**
 * Edit distance counting insertions, deletions, substitutions and swaps of two neighbours as one
 * each (optimal string alignment), so `nmae` is one edit from `name`.
 */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const row = rows[i]!;
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        row[j] = Math.min(row[j]!, rows[i - 2]![j - 2]! + 1);
    }
  }
  return rows[a.length]![b.length]!;
}

/** A package's option check: checkOptionKeys throwing that package's error. */
export type OptionKeysCheck = (
  where: string,
  options: unknown,
  known: Readonly<Record<string, true>>,
  foreign?: ForeignNames,
) => void;

/**
 * The option check of a package whose error `createError` makes (each package's
 * `internal/check-option-keys.ts` is one call of this).
 */
export function optionKeysCheck(createError: UnknownOptionErrorFactory): OptionKeysCheck {
  return (where, options, known, foreign = {}) =>
    checkOptionKeys(where, options, known, foreign, createError);
}

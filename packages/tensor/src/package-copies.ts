// [Note: duplicate package copies]
// Two copies of @fsdp-ts/tensor in one process (the ESM build imported by one package and the
// CommonJS build required by another, or two installed versions) make two `Parameter` classes:
// `instanceof` fails across them and errors downstream say something beside the point. Each copy
// records where it was loaded from in a registry on globalThis (keyed by Symbol.for, so every copy
// finds the same one) and marks its Parameters, so a check that fails `instanceof` can say which
// copies are loaded and how to end up with one.

const registryKey = Symbol.for('@fsdp-ts/tensor.loadedCopies');
/** Set on Parameter.prototype by every copy. */
export const PARAMETER_MARKER: unique symbol = Symbol.for('@fsdp-ts/tensor.Parameter') as never;

function loadedFrom(): string {
  // The ESM build and source have import.meta.url; the CommonJS build has __filename.
  const url: unknown = import.meta.url;
  if (typeof url === 'string' && url !== '') return url;
  return typeof __filename === 'string' ? __filename : 'unknown';
}

const globals = globalThis as Record<symbol, string[] | undefined>;
const registry: string[] = globals[registryKey] ?? [];
globals[registryKey] = registry;
registry.push(loadedFrom());

/** Where each copy of @fsdp-ts/tensor in this process was loaded from, in load order. */
export function loadedTensorCopies(): readonly string[] {
  return registry;
}

/** The message for a Parameter of another copy (see explainForeignParameter in parameter.ts). */
export function foreignParameterMessage(): string {
  return (
    `it is a Parameter from another copy of @fsdp-ts/tensor (${registry.length} copies loaded: ` +
    `${registry.join(', ')}). Load every @fsdp-ts package the same way (all import or all require) ` +
    'and make sure one version is installed (`npm ls @fsdp-ts/tensor`, then `npm dedupe`).'
  );
}

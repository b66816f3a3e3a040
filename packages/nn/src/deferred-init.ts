import type { Module } from './module';

/**
 * [Note: deferred initialisation]
 * `deferredInit(() => new GPT(config))` builds a module whose Parameters hold no values: each is
 * a deferred Parameter (tensor's [Note: deferred parameters]) that records its shape, dtype and
 * initializer, and for a random one the generator's state before its draws. The generator is
 * then advanced past the draws the eager build would make (Generator.skipNormals), so every later
 * parameter records the same state it would have drawn from, and the generator ends where eager
 * construction leaves it. Values made later, whole or any range, are those of eager construction
 * with the same seed, bit for bit. PyTorch's meta device plus `reset_parameters`, without a
 * second pass: the layers record their own init.
 * FSDP fills each rank's shard of every unit straight from the initializers while flattening, so
 * a rank never holds more than its share (see fsdp's [Note: deferred wrapping]); without FSDP,
 * `materializeParameters(module)` makes every value.
 * Only the layers' own parameters defer (they create them through `normalParameter` and
 * `constantParameter`); a Parameter a custom module allocates itself is eager as before, and can
 * defer by being made with `Parameter.deferred(shape, initializer)`.
 */
let deferring = 0;

/** Runs `build` with parameter initialisation deferred; returns what it returns. */
export function deferredInit<T>(build: () => T): T {
  deferring++;
  try {
    return build();
  } finally {
    deferring--;
  }
}

/** True inside `deferredInit`: layers create deferred Parameters. */
export function isInitDeferred(): boolean {
  return deferring > 0;
}

/** Makes the values of every deferred Parameter of `module` (each tied Parameter once). */
export function materializeParameters<M extends Module>(module: M): M {
  for (const parameter of module.parameters()) parameter.materialize();
  return module;
}

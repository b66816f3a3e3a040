import type { Scalar, Tensor, Variable } from '@tensorflow/tfjs-core';
import type * as tfl from '@tensorflow/tfjs-layers';
import type { LayerVariable } from '@tensorflow/tfjs-layers';

/**
 * The parts of tfjs-layers objects this package reads that its typings keep protected. Every use
 * goes through these accessors, so a tfjs-layers upgrade that renames them breaks here, in one file.
 */
export interface BatchNormalizationInternals {
  axis: number;
  momentum: number;
  epsilon: number;
  gamma: LayerVariable | null | undefined;
  beta: LayerVariable | null | undefined;
  movingMean: LayerVariable;
  movingVariance: LayerVariable;
}

export function batchNormalizationInternals(layer: tfl.layers.Layer): BatchNormalizationInternals {
  return layer as unknown as BatchNormalizationInternals;
}

/** Every layer of the model, nested models flattened, each once, in depth-first order. */
export function allLayers(model: tfl.LayersModel): tfl.layers.Layer[] {
  const seen = new Set<tfl.layers.Layer>();
  const visit = (layers: readonly tfl.layers.Layer[]): void => {
    for (const layer of layers) {
      if (seen.has(layer)) continue;
      seen.add(layer);
      const nested = (layer as unknown as { layers?: tfl.layers.Layer[] }).layers;
      if (Array.isArray(nested)) visit(nested);
    }
  };
  visit(model.layers);
  return [...seen];
}

/** The regularization penalties model.fit adds to the loss (`calculateLosses` is protected in the typings). */
export function regularizationLosses(model: tfl.LayersModel): Scalar[] {
  return (model as unknown as { calculateLosses(): Scalar[] }).calculateLosses();
}

/** The tf.Variable behind a LayerVariable (`read()` returns it; its typings say Tensor). */
export function backingVariable(variable: LayerVariable): Variable {
  return variable.read() as Variable;
}

type Call = (inputs: Tensor | Tensor[], kwargs: Record<string, unknown>) => Tensor | Tensor[];

/**
 * Replaces `call` on this layer instance with `make(current call)`; returns the function putting
 * back what was there (an own property set by an earlier replacement, or the class's method).
 * Replacements nest: restore them in reverse order.
 */
export function replaceCall(layer: tfl.layers.Layer, make: (original: Call) => Call): () => void {
  const previous = Object.getOwnPropertyDescriptor(layer, 'call');
  const current = (layer as unknown as { call: Call }).call.bind(layer);
  Object.defineProperty(layer, 'call', { value: make(current), configurable: true, writable: true });
  return () => {
    if (previous === undefined) delete (layer as unknown as { call?: Call }).call;
    else Object.defineProperty(layer, 'call', previous);
  };
}

/**
 * Makes `variable.read()` return `value` until the returned function is called (`val` is the
 * LayerVariable's protected field that `read()` returns; layers read their weights through it).
 */
export function swapVariableValue(variable: LayerVariable, value: Tensor): () => void {
  const holder = variable as unknown as { val: Tensor };
  const previous = holder.val;
  holder.val = value;
  return () => {
    holder.val = previous;
  };
}

/** The layers' own regularization penalties need their weights at loss time; full-shard has released them. */
export function hasRegularizers(layer: tfl.layers.Layer): boolean {
  const losses = (layer as unknown as { _losses?: unknown[] })._losses;
  return Array.isArray(losses) && losses.length > 0;
}

import type { TensorView } from './tensor-view';

/**
 * How a deferred Parameter's values are made (see [Note: deferred parameters]). Implementations
 * live where the values are defined (nn's normal and constant initializers); anything that can
 * compute a contiguous range of a parameter's row-major values can be one (PyTorch's
 * `param_init_fn`, restricted to what one rank keeps).
 *
 * [Note: initializer ranges]
 * `fill(target, start)` writes elements [start, start + target.numel) of the parameter's values,
 * in row-major order, into `target` (a contiguous 1-D view of the parameter's dtype). Any range
 * must give exactly the values the whole parameter would have there, bit for bit, whatever ranges
 * were filled before: a rank that keeps elements [start, end) of a parameter fills only those.
 */
export interface ParameterInitializer {
  /** What the values are, for messages and the structure of a model ("normal(0, 0.02)"). */
  readonly description: string;
  /** Writes the initial values of `target`, which starts at element `start` of the parameter. */
  fill(target: TensorView, start: number): void;
}

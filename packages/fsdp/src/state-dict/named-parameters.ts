import type { Parameter, TensorView } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import type { ParameterLocation } from '../internal/fsdp-unit';

/** One parameter as the state dicts see it: original name, shape, and this rank's part. */
export interface ParameterEntry {
  readonly name: string;
  /** Other names of a tied parameter (accepted on load, not required). */
  readonly aliases: readonly string[];
  readonly parameter: Parameter;
  readonly shape: readonly number[];
  readonly numel: number;
  /** undefined for parameters of ignoredModules. */
  readonly location: ParameterLocation | undefined;
}

/** Every parameter of the wrapped model under its original name, in the model's order. */
export function parameterEntries(model: FullyShardedDataParallel): ParameterEntry[] {
  const aliases = new Map<Parameter, string[]>();
  for (const unit of model.units)
    for (const handle of unit.handles)
      handle.parameters.forEach((parameter, index) => {
        aliases.set(parameter, [...handle.layout.parameters[index]!.names]);
      });
  return model.namedParameters().map(([name, parameter]) => {
    const shape = [...parameter.shape];
    return {
      name,
      aliases: (aliases.get(parameter) ?? []).filter((alias) => alias !== name),
      parameter,
      shape,
      numel: shape.reduce((product, size) => product * size, 1),
      location: model.locate(parameter),
    };
  });
}

/**
 * This rank's part of a parameter between steps: elements [offset, offset + length) of the
 * row-major parameter, aliasing `parameter.data` (see [Note: what Parameters look like]).
 */
export function localPart(entry: ParameterEntry): { offset: number; values: Float32Array } {
  const data = entry.parameter.data;
  const offset = entry.parameter.isFullShape
    ? 0
    : entry.location!.handle.intersections[entry.location!.index]!.offsetInParam;
  return { offset, values: float32Values(data) };
}

/** Offset of this rank's part of a parameter (0 when it is full-shape). */
export function localOffset(model: FullyShardedDataParallel, parameter: Parameter): number {
  const location = model.locate(parameter);
  if (parameter.isFullShape || location === undefined) return 0;
  return location.handle.intersections[location.index]!.offsetInParam;
}

/** A float32 array of the view's elements: aliasing when contiguous float32, else a copy. */
export function float32Values(view: TensorView): Float32Array {
  if (view.dtype === 'float32' && view.isContiguous) return view.typedArray() as Float32Array;
  const values = new Float32Array(view.numel);
  view.toArray().forEach((value, index) => {
    values[index] = value;
  });
  return values;
}

import { type DType, formatShape, type Parameter } from '@fsdp-ts/tensor';
import { FlatParamError } from '../errors';
import type { LayoutParameterSpec } from '../layout';

export interface CollectedParameters {
  /** Distinct Parameters in order of first registration (the layout order). */
  readonly parameters: Parameter[];
  readonly specs: LayoutParameterSpec[];
  readonly dtype: DType;
}

/**
 * Deduplicates tied parameters (one Parameter object under several names occupies the layout
 * once, at the position of its first name) and checks that the unit has one dtype and that every
 * Parameter currently shows its full original shape (its values can be read).
 */
export function collectParameters(
  named: readonly (readonly [string, Parameter])[],
  dtype: DType | undefined,
): CollectedParameters {
  const indexOf = new Map<Parameter, number>();
  const parameters: Parameter[] = [];
  const names: string[][] = [];
  for (const [name, parameter] of named) {
    const index = indexOf.get(parameter);
    if (index !== undefined) {
      names[index]!.push(name);
      continue;
    }
    indexOf.set(parameter, parameters.length);
    parameters.push(parameter);
    names.push([name]);
  }
  const unitDType = dtype ?? parameters[0]?.dtype ?? 'float32';
  checkOneDType(parameters, names, unitDType, dtype !== undefined);
  parameters.forEach((parameter, index) => {
    if (!parameter.isFullShape) {
      throw new FlatParamError(
        `Parameter ${names[index]!.join(' / ')} shows a ${formatShape(parameter.data.shape)} part, not its full shape ${formatShape(parameter.shape)}: its values cannot be read.`,
        {
          code: 'not-full-shape',
          expected: parameter.shape,
          actual: parameter.data.shape,
          parameters: names[index]!,
          fix: 'flatten a parameter once: exclude parameters already owned by another FlatParamHandle (or unshard that handle first).',
        },
      );
    }
  });
  const specs = parameters.map((parameter, index) => ({
    names: names[index]!,
    shape: parameter.shape,
    frozen: !parameter.requiresGrad,
  }));
  return { parameters, specs, dtype: unitDType };
}

function checkOneDType(
  parameters: readonly Parameter[],
  names: readonly string[][],
  dtype: DType,
  explicit: boolean,
): void {
  const offending = parameters.flatMap((parameter, index) =>
    parameter.dtype === dtype ? [] : names[index]!,
  );
  if (offending.length === 0) return;
  const byDType = new Map<DType, string[]>();
  parameters.forEach((parameter, index) => {
    byDType.set(parameter.dtype, [...(byDType.get(parameter.dtype) ?? []), ...names[index]!]);
  });
  const found = [...byDType].map(([key, keyNames]) => `${key}: ${keyNames.join(', ')}`).join('; ');
  throw new FlatParamError(
    `The parameters of one unit must share one dtype (${dtype}${explicit ? ', as requested' : ', the first parameter'}s); found ${found}.`,
    {
      code: 'dtype-mismatch',
      expected: dtype,
      actual: Object.fromEntries(byDType),
      parameters: offending,
      fix: `convert ${offending.join(', ')} to ${dtype}, or put parameters of different dtypes in different units.`,
    },
  );
}

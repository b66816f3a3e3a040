import { isDType } from '@fsdp-ts/tensor';
import { FlatParamError } from './errors';
import { computeFlatParamLayout, FLAT_PARAM_LAYOUT_VERSION, type FlatParamLayout } from './layout';

/** What `FlatParamHandle.metadata()` returns and checkpoints store: the layout as plain JSON. */
export type FlatParamMetadata = FlatParamLayout;

/**
 * Checks that `value` (e.g. `JSON.parse` of a checkpoint's metadata) is a layout this version can
 * read and that its offsets and sizes are the ones the layout rule gives for its names, shapes,
 * alignment and world size. Returns it typed; throws FlatParamError('invalid-metadata') otherwise.
 */
export function parseFlatParamMetadata(value: unknown): FlatParamMetadata {
  const record = value as Partial<Record<keyof FlatParamLayout, unknown>> | null;
  if (typeof record !== 'object' || record === null) throw invalid('an object', value);
  if (record.version !== FLAT_PARAM_LAYOUT_VERSION) {
    throw invalid(`version ${FLAT_PARAM_LAYOUT_VERSION}`, record.version);
  }
  if (!isDType(record.dtype)) throw invalid('a dtype', record.dtype);
  if (!Array.isArray(record.parameters)) throw invalid('a parameters array', record.parameters);
  let expected: FlatParamLayout;
  try {
    expected = computeFlatParamLayout(
      (record.parameters as unknown[]).map((entry) => {
        const parameter = entry as { names?: unknown; shape?: unknown; frozen?: unknown };
        return {
          names: parameter.names as string[],
          shape: parameter.shape as number[],
          frozen: parameter.frozen === true,
        };
      }),
      {
        dtype: record.dtype,
        worldSize: record.worldSize as number,
        alignment: record.alignment as number,
      },
    );
  } catch (error) {
    throw invalid('valid names, shapes, world size and alignment', value, error);
  }
  const actual = value as FlatParamLayout;
  const same =
    actual.totalNumel === expected.totalNumel &&
    actual.paddedNumel === expected.paddedNumel &&
    actual.shardNumel === expected.shardNumel &&
    expected.parameters.every(
      (parameter, index) =>
        actual.parameters[index]?.offset === parameter.offset &&
        actual.parameters[index]?.numel === parameter.numel &&
        typeof actual.parameters[index]?.frozen === 'boolean',
    );
  if (!same) throw invalid(JSON.stringify(expected), value);
  return actual;
}

function invalid(expected: string, actual: unknown, cause?: unknown): FlatParamError {
  return new FlatParamError(`Not a valid flat-parameter layout: expected ${expected}.`, {
    code: 'invalid-metadata',
    expected,
    actual,
    fix: 'pass the object FlatParamHandle.metadata() returned (after a JSON round trip), unmodified.',
    ...(cause === undefined ? {} : { cause }),
  });
}

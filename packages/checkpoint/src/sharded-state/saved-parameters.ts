import type { FlatParamLayout } from '@fsdp-ts/flat-param';
import { formatShape, shapesEqual } from '@fsdp-ts/tensor';
import type { FlatShard } from './flat-shard';

/** A saved flat parameter: its group, its position in the group, its layout. */
export interface SavedFlatParameter {
  readonly unit: string;
  readonly handle: number;
  readonly layout: FlatParamLayout;
}

/** Where a current parameter lives in the saved state. */
export interface SavedLocation {
  readonly unit: string;
  readonly handle: number;
  readonly layout: FlatParamLayout;
  /** Its first name in the saved state (the key of its optimizer state). */
  readonly name: string;
}

export interface ParameterMatch {
  /** By each current parameter's first name. */
  readonly matched: Map<string, SavedLocation>;
  /** One line per offender: missing, extra, or another shape or dtype. */
  readonly problems: string[];
  readonly offenders: string[];
}

/**
 * Matches the current flat parameters' parameters with the saved ones by name (any of a tied
 * parameter's names): groups and flat parameters may differ (another wrap policy, flattening,
 * world size); names, shapes and dtypes may not. Reports every offender; the caller throws its
 * own error (checkpoints: CheckpointError, state dicts: FsdpError).
 */
export function matchSavedParameters(
  saved: readonly SavedFlatParameter[],
  current: readonly Pick<FlatShard, 'layout'>[],
  source = 'the checkpoint',
): ParameterMatch {
  const byName = new Map<string, SavedLocation & { shape: readonly number[]; dtype: string }>();
  for (const entry of saved) {
    for (const parameter of entry.layout.parameters) {
      for (const name of parameter.names) {
        byName.set(name, {
          unit: entry.unit,
          handle: entry.handle,
          layout: entry.layout,
          name: parameter.names[0]!,
          shape: parameter.shape,
          dtype: entry.layout.dtype,
        });
      }
    }
  }
  const problems: string[] = [];
  const offenders: string[] = [];
  const matched = new Map<string, SavedLocation>();
  const used = new Set<string>();
  for (const { layout } of current) {
    for (const parameter of layout.parameters) {
      const name = parameter.names[0]!;
      const found = parameter.names
        .map((candidate) => byName.get(candidate))
        .find((value) => value !== undefined);
      if (found === undefined) {
        problems.push(`${name} is missing from ${source}`);
        offenders.push(name);
        continue;
      }
      for (const tied of found.layout.parameters.find((value) => value.names[0] === found.name)!.names)
        used.add(tied);
      if (!shapesEqual(found.shape, parameter.shape) || found.dtype !== layout.dtype) {
        problems.push(
          `${name} is ${formatShape(parameter.shape)} ${layout.dtype} in the model but ${formatShape(found.shape)} ${found.dtype} in ${source}`,
        );
        offenders.push(name);
        continue;
      }
      const { shape: _shape, dtype: _dtype, ...location } = found;
      matched.set(name, location);
    }
  }
  const extra = [...byName.keys()].filter((name) => !used.has(name));
  for (const name of extra) problems.push(`${name} is in ${source} but not in the model`);
  offenders.push(...extra);
  return { matched, problems, offenders };
}

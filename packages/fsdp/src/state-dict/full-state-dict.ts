import type { OptionKeys } from '@fsdp-ts/errors';
import type { StateDict } from '@fsdp-ts/nn';
import { TensorView } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { checkFsdpOptionKeys } from '../internal/check-option-keys';
import { fsdpRuntime } from '../internal/wrapper-runtime';
import { checkNames } from './check-names';
import { float32Values, localPart, parameterEntries } from './named-parameters';

/** Options of fullStateDict. */
export interface FullStateDictOptions {
  /** Only rank 0 receives the values (the others return {}); every rank must still call. Default false. */
  rank0Only?: boolean;
}

/** The keys of FullStateDictOptions ([Note: option keys] in @fsdp-ts/errors). */
export const fullStateDictOptionKeys = {
  rank0Only: true,
} as const satisfies OptionKeys<FullStateDictOptions>;

/** PyTorch's FullStateDictConfig fields, with what fsdp-ts calls them. */
export const pytorchStateDictConfigNames = {
  rank0_only: "PyTorch's rank0_only is rank0Only here",
  offload_to_cpu: 'no equivalent: the state dict is built in this process; remove it',
} as const;

/**
 * [Note: full state dict]
 * Collective. Unit by unit, in unit order on every rank: all-gather the unit in float32, copy its
 * full parameters into new full-shape float32 views under their original names, reshard. Peak
 * memory beyond the result is one unit's unsharded buffer. Buffers and parameters of
 * ignoredModules are copied as they are. The result is what the unwrapped module's
 * `stateDict()` would hold (as copies), so `module.loadStateDict(dict)` of an unwrapped model
 * accepts it.
 */
export function fullStateDict(
  model: FullyShardedDataParallel,
  options: FullStateDictOptions = {},
): StateDict {
  checkFsdpOptionKeys('fullStateDict', options, fullStateDictOptionKeys, pytorchStateDictConfigNames);
  model.expectIdle('fullStateDict()');
  const keep = !(options.rank0Only ?? false) || model.group.rank === 0;
  const entries = parameterEntries(model);
  const dict: StateDict = {};
  for (const unit of model[fsdpRuntime].units) {
    const gather = unit.state === 'sharded';
    if (gather) unit.finishUnshard(model.group, 'float32');
    try {
      if (!keep) continue;
      for (const entry of entries) {
        if (entry.location?.unit !== unit) continue;
        dict[entry.name] = copy(entry.parameter.data);
      }
    } finally {
      if (gather) unit.reshard();
    }
  }
  if (!keep) return {};
  for (const entry of entries)
    if (entry.location === undefined) dict[entry.name] = copy(entry.parameter.data);
  for (const [name, view] of model.namedBuffers()) dict[name] = copy(view);
  // The model's order (units gathered in unit order).
  const ordered: StateDict = {};
  for (const entry of entries) ordered[entry.name] = dict[entry.name]!;
  for (const [name] of model.namedBuffers()) ordered[name] = dict[name]!;
  return ordered;
}

/**
 * Loads a full state dict: every rank passes the whole dict and keeps its own part (no
 * communication). Names and shapes are checked first (a tied parameter needs only one of its
 * names, and loads from the first present); every offender is named in one FsdpError('state-dict-mismatch') and nothing is
 * loaded then.
 */
export function loadFullStateDict(model: FullyShardedDataParallel, dict: StateDict): void {
  model.expectIdle('loadFullStateDict()');
  const entries = parameterEntries(model);
  const expected = new Map<string, readonly number[]>();
  const aliases = new Map<string, readonly number[]>();
  // A tied parameter loads from the first of its names the dict has (as @fsdp-ts/nn's
  // loadStateDict does, [Note: loading tied parameters]): safetensors.torch.save_model keeps one
  // name of each tied pair. It is missing only when the dict has none of them.
  const sources = entries.map(
    (entry) => [entry.name, ...entry.aliases].find((name) => Object.hasOwn(dict, name)) ?? entry.name,
  );
  entries.forEach((entry, index) => {
    for (const name of [entry.name, ...entry.aliases]) {
      if (name === sources[index]) expected.set(name, entry.shape);
      else aliases.set(name, entry.shape);
    }
  });
  for (const [name, view] of model.namedBuffers()) expected.set(name, view.shape);
  const actual = new Map(Object.entries(dict).map(([name, view]) => [name, view.shape] as const));
  checkNames('loadFullStateDict', expected, aliases, actual);
  for (const [index, entry] of entries.entries()) {
    const source = float32Values(dict[sources[index]!]!);
    const { offset, values } = localPart(entry);
    values.set(source.subarray(offset, offset + values.length));
  }
  for (const [name, view] of model.namedBuffers()) view.copyFrom(dict[name]!);
}

function copy(view: TensorView): TensorView {
  return TensorView.zeros([...view.shape], view.dtype).copyFrom(view);
}

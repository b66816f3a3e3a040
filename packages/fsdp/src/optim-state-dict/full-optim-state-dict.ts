import {
  FSDP_OPTIM_STATE_DICT_FORMAT,
  type FsdpOptimParameterState,
  type FsdpOptimStateDict,
  type StatefulOptimizer,
} from '@fsdp-ts/checkpoint';
import { allocateShared } from '@fsdp-ts/collectives';
import type { OptionKeys } from '@fsdp-ts/errors';
import type { ParameterStateEntry } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { checkFsdpOptionKeys } from '../internal/check-option-keys';
import { pytorchStateDictConfigNames } from '../state-dict/full-state-dict';
import { localOffset } from '../state-dict/named-parameters';
import { loadOptimState, namedOptimizerState, nameOf } from './sharded-optim-state-dict';

/** Options of fullOptimStateDict. */
export interface FullOptimStateDictOptions {
  /** Only rank 0 keeps the result (the others get an empty state); every rank must call. */
  rank0Only?: boolean;
}

/** The keys of FullOptimStateDictOptions ([Note: option keys] in @fsdp-ts/errors). */
const fullOptimStateDictOptionKeys = {
  rank0Only: true,
} as const satisfies OptionKeys<FullOptimStateDictOptions>;

/**
 * [Note: full optimizer state]
 * Collective. Optimizer state follows `param.data` (see [Note: state follows data] in
 * @fsdp-ts/optim), so each rank holds its shard's range of every state buffer. Per flat
 * parameter and per state buffer name, each rank lays its ranges out like the flat shard and one
 * all-gather yields the whole buffer, cut per parameter. Every rank must hold state for the same
 * parameters (true when they run the same optimizer over the same parameters: ranks with an
 * empty part still step and get empty buffers). Under 'no-shard' the state is whole already.
 */
export function fullOptimStateDict(
  model: FullyShardedDataParallel,
  optimizer: StatefulOptimizer,
  options: FullOptimStateDictOptions = {},
): FsdpOptimStateDict {
  checkFsdpOptionKeys(
    'fullOptimStateDict',
    options,
    fullOptimStateDictOptionKeys,
    pytorchStateDictConfigNames,
  );
  model.expectIdle('fullOptimStateDict()');
  const { saved, names, paramGroups } = namedOptimizerState(model, optimizer);
  const byParameter = new Map<Parameter, ParameterStateEntry>();
  for (const [position, entry] of Object.entries(saved.state))
    byParameter.set(optimizer.parameters[Number(position)]!, entry);
  const state: Record<string, FsdpOptimParameterState> = {};
  const whole = (parameter: Parameter, entry: ParameterStateEntry) => {
    const buffers: FsdpOptimParameterState['buffers'] = {};
    for (const [buffer, values] of Object.entries(entry.buffers)) buffers[buffer] = [{ offset: 0, values }];
    state[nameOf(names, parameter)] = { shape: [...entry.shape], step: entry.step, buffers };
  };
  const group = model.group;
  for (const unit of model.units) {
    for (const handle of unit.handles) {
      const held = handle.parameters.flatMap((parameter, index) => {
        const entry = byParameter.get(parameter);
        return entry === undefined ? [] : [{ parameter, index, entry }];
      });
      if (held.length === 0) continue;
      if (handle.worldSize === 1 || group.size === 1) {
        for (const { parameter, entry } of held) whole(parameter, entry);
        continue;
      }
      const bufferNames = [...new Set(held.flatMap(({ entry }) => Object.keys(entry.buffers)))].sort();
      const full: Record<string, Float32Array> = {};
      for (const buffer of bufferNames) {
        const shard = allocateShared(Float32Array, handle.layout.shardNumel);
        for (const { index, entry } of held) {
          const values = entry.buffers[buffer];
          if (values !== undefined) shard.set(values, handle.intersections[index]!.offsetInShard);
        }
        full[buffer] = allocateShared(Float32Array, handle.layout.paddedNumel);
        group.allGather(full[buffer]!, shard).wait();
      }
      for (const { parameter, index, entry } of held) {
        const layout = handle.layout.parameters[index]!;
        const buffers: FsdpOptimParameterState['buffers'] = {};
        for (const buffer of Object.keys(entry.buffers)) {
          const values = full[buffer]!.slice(layout.offset, layout.offset + layout.numel);
          buffers[buffer] = [{ offset: 0, values }];
        }
        state[nameOf(names, parameter)] = { shape: [...entry.shape], step: entry.step, buffers };
      }
    }
  }
  for (const [parameter, entry] of byParameter) {
    if (model.locate(parameter) === undefined && localOffset(model, parameter) === 0) whole(parameter, entry);
  }
  const keep = !(options.rank0Only ?? false) || group.rank === 0;
  return {
    format: FSDP_OPTIM_STATE_DICT_FORMAT,
    kind: 'full',
    optimizer: optimizer.kind,
    paramGroups,
    state: keep ? state : {},
  };
}

/** Loads a full optimizer state dict (every rank passes it); no communication. */
export function loadFullOptimStateDict(
  model: FullyShardedDataParallel,
  optimizer: StatefulOptimizer,
  dict: FsdpOptimStateDict,
): void {
  loadOptimState(model, optimizer, dict, 'loadFullOptimStateDict');
}

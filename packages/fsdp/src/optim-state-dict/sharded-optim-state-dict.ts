import {
  FSDP_OPTIM_STATE_DICT_FORMAT,
  type FsdpOptimParameterState,
  type FsdpOptimStateDict,
  type Piece,
  type StatefulOptimizer,
} from '@fsdp-ts/checkpoint';
import { assembleRange } from '@fsdp-ts/checkpoint/internal';
import type { OptimizerStateDict, ParameterStateEntry } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import { FsdpError } from '../errors';
import type { FullyShardedDataParallel } from '../fully-sharded-data-parallel';
import { localOffset, parameterEntries } from '../state-dict/named-parameters';

/** Original name of every parameter of the wrapped model. */
export function parameterNames(model: FullyShardedDataParallel): Map<Parameter, string> {
  return new Map(parameterEntries(model).map((entry) => [entry.parameter, entry.name]));
}

/** The optimizer's state dict with positions translated to original names. */
export function namedOptimizerState(
  model: FullyShardedDataParallel,
  optimizer: StatefulOptimizer,
): {
  saved: OptimizerStateDict;
  names: Map<Parameter, string>;
  paramGroups: FsdpOptimStateDict['paramGroups'];
} {
  const names = parameterNames(model);
  const saved = optimizer.stateDict();
  const paramGroups = saved.paramGroups.map((group, index) => ({
    hyperparameters: group.hyperparameters,
    paramNames: optimizer.paramGroups[index]!.params.map((parameter) => nameOf(names, parameter)),
  }));
  return { saved, names, paramGroups };
}

export function nameOf(names: Map<Parameter, string>, parameter: Parameter): string {
  const name = names.get(parameter);
  if (name === undefined) {
    throw new FsdpError(`${parameter} is in the optimizer but not in the wrapped model.`, {
      code: 'state-dict-mismatch',
      expected: 'an optimizer over the wrapped model’s parameters',
      actual: String(parameter),
      fix: 'build the optimizer from model.parameters() (or a subset of them).',
    });
  }
  return name;
}

/** This rank's optimizer state by original name (no communication). */
export function shardedOptimStateDict(
  model: FullyShardedDataParallel,
  optimizer: StatefulOptimizer,
): FsdpOptimStateDict {
  model.expectIdle('shardedOptimStateDict()');
  const { saved, names, paramGroups } = namedOptimizerState(model, optimizer);
  const parameters = optimizer.parameters;
  const state: Record<string, FsdpOptimParameterState> = {};
  for (const [position, entry] of Object.entries(saved.state) as [string, ParameterStateEntry][]) {
    const parameter = parameters[Number(position)]!;
    const offset = localOffset(model, parameter);
    const buffers: Record<string, Piece[]> = {};
    for (const [buffer, values] of Object.entries(entry.buffers)) buffers[buffer] = [{ offset, values }];
    state[nameOf(names, parameter)] = { shape: [...entry.shape], step: entry.step, buffers };
  }
  return {
    format: FSDP_OPTIM_STATE_DICT_FORMAT,
    kind: 'sharded',
    optimizer: optimizer.kind,
    paramGroups,
    state,
  };
}

/**
 * Loads optimizer state saved by full or sharded dicts at any world size and strategy: for each
 * parameter this rank's range is assembled from the pieces of every dict given (see
 * [Note: resharding]), then handed to `optimizer.loadStateDict` in its own format. Checks the
 * optimizer kind, the groups and every name first; nothing changes when it throws.
 */
export function loadOptimState(
  model: FullyShardedDataParallel,
  optimizer: StatefulOptimizer,
  input: FsdpOptimStateDict | readonly FsdpOptimStateDict[],
  method: string,
): void {
  model.expectIdle(`${method}()`);
  const dicts: readonly FsdpOptimStateDict[] = Array.isArray(input) ? input : [input as FsdpOptimStateDict];
  const first = dicts[0];
  const mismatch = (message: string, expected: unknown, actual: unknown, fix: string) =>
    new FsdpError(`${method}: ${message}`, { code: 'state-dict-mismatch', expected, actual, fix });
  if (first === undefined || dicts.some((dict) => dict?.format !== FSDP_OPTIM_STATE_DICT_FORMAT)) {
    throw mismatch(
      'not an FSDP optimizer state dict.',
      FSDP_OPTIM_STATE_DICT_FORMAT,
      dicts.map((dict) => dict?.format),
      'pass what fullOptimStateDict() or shardedOptimStateDict() returned.',
    );
  }
  if (first.optimizer !== optimizer.kind) {
    throw mismatch(
      `saved by ${first.optimizer}, loading into ${optimizer.kind}.`,
      optimizer.kind,
      first.optimizer,
      'load into the same kind of optimizer.',
    );
  }
  const names = parameterNames(model);
  const groups = optimizer.paramGroups;
  if (first.paramGroups.length !== groups.length) {
    throw mismatch(
      `the dict has ${first.paramGroups.length} param groups, the optimizer ${groups.length}.`,
      groups.length,
      first.paramGroups.length,
      'build the optimizer with the same groups.',
    );
  }
  const offenders: string[] = [];
  groups.forEach((group, index) => {
    const here = group.params.map((parameter) => nameOf(names, parameter));
    const there = first.paramGroups[index]!.paramNames;
    const missing = here.filter((name) => !there.includes(name));
    const extra = there.filter((name) => !here.includes(name));
    if (missing.length > 0) offenders.push(`group ${index} lacks ${missing.join(', ')}`);
    if (extra.length > 0) offenders.push(`group ${index} has unexpected ${extra.join(', ')}`);
  });
  const known = new Set(optimizer.parameters.map((parameter) => nameOf(names, parameter)));
  for (const dict of dicts)
    for (const name of Object.keys(dict.state))
      if (!known.has(name)) offenders.push(`state for unknown parameter ${name}`);
  if (offenders.length > 0) {
    throw mismatch(
      `the dict does not match the optimizer: ${[...new Set(offenders)].join('; ')}.`,
      [...known],
      offenders,
      'load a dict saved for the same model and param groups.',
    );
  }
  const state: Record<number, ParameterStateEntry> = {};
  let position = 0;
  const paramGroups = groups.map((group, index) => {
    const positions: number[] = [];
    for (const parameter of group.params) {
      const name = nameOf(names, parameter);
      const saved = dicts.map((dict) => dict.state[name]).filter((entry) => entry !== undefined);
      const reference = saved[0];
      if (reference !== undefined) {
        const shape = [...parameter.shape];
        if (
          reference.shape.length !== shape.length ||
          reference.shape.some((size, axis) => size !== shape[axis])
        ) {
          throw mismatch(
            `${name} has shape [${shape.join(', ')}], its saved state [${reference.shape.join(', ')}].`,
            shape,
            reference.shape,
            'load state saved for the same model.',
          );
        }
        const numel = parameter.data.numel;
        const offset = localOffset(model, parameter);
        const buffers: Record<string, Float32Array> = {};
        for (const buffer of Object.keys(reference.buffers)) {
          const values = new Float32Array(numel);
          assembleRange(
            `${name} (${buffer})`,
            saved.flatMap((entry) => entry.buffers[buffer] ?? []),
            offset,
            values,
          );
          buffers[buffer] = values;
        }
        state[position] = { name: parameter.name, shape, numel, step: reference.step, buffers };
      }
      positions.push(position++);
    }
    return {
      hyperparameters: first.paramGroups[index]!.hyperparameters,
      params: positions,
      paramNames: group.params.map((parameter) => parameter.name),
    };
  });
  optimizer.loadStateDict({ format: 'fsdp-ts/optim-state@1', optimizer: optimizer.kind, state, paramGroups });
}

/** Loads sharded optimizer state dicts (every saving rank's, any world size). No communication. */
export function loadShardedOptimStateDict(
  model: FullyShardedDataParallel,
  optimizer: StatefulOptimizer,
  dicts: FsdpOptimStateDict | readonly FsdpOptimStateDict[],
): void {
  loadOptimState(model, optimizer, dicts, 'loadShardedOptimStateDict');
}

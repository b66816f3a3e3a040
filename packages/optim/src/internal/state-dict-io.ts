import { formatShape, type Parameter, shapesEqual } from '@fsdp-ts/tensor';
import { OptimError } from '../errors';
import type { BaseOptions, HyperparameterValue, ParamGroup } from '../param-group';
import type { OptimizerStateDict, ParameterStateEntry } from '../state-dict';
import { ParameterState } from './parameter-state';

const FORMAT = 'fsdp-ts/optim-state@1';

/** A state dict (copies unless `copy` is false): state keyed by position, groups with positions and names. */
export function saveOptimizerState<Options extends BaseOptions>(
  kind: string,
  groups: readonly ParamGroup<Options>[],
  states: ReadonlyMap<Parameter, ParameterState>,
  copy: boolean,
): OptimizerStateDict {
  const state: Record<number, ParameterStateEntry> = {};
  let position = 0;
  const paramGroups = groups.map((group) => {
    const { params, ...hyperparameters } = group;
    const positions: number[] = [];
    for (const param of params) {
      const parameterState = states.get(param);
      if (parameterState !== undefined) {
        const buffers: Record<string, Float32Array> = {};
        for (const [name, buffer] of parameterState.buffers) buffers[name] = copy ? buffer.slice() : buffer;
        state[position] = {
          name: param.name,
          shape: [...param.shape],
          numel: parameterState.numel,
          step: parameterState.step,
          buffers,
        };
      }
      positions.push(position++);
    }
    return {
      hyperparameters: copyHyperparameters(hyperparameters as Record<string, HyperparameterValue>),
      params: positions,
      paramNames: params.map((param) => param.name),
    };
  });
  return { format: FORMAT, optimizer: kind, state, paramGroups };
}

export interface LoadedOptimizerState {
  hyperparameters: Record<string, HyperparameterValue>[];
  state: Map<Parameter, ParameterState>;
}

/** Checks `stateDict` against the optimizer's groups and returns state ready to install (copies unless `copy` is false). */
export function loadOptimizerState<Options extends BaseOptions>(
  kind: string,
  groups: readonly ParamGroup<Options>[],
  defaults: Readonly<Options>,
  stateDict: OptimizerStateDict,
  copy: boolean,
): LoadedOptimizerState {
  const mismatch = (
    message: string,
    expected: unknown,
    actual: unknown,
    fix: string,
    parameter?: Parameter,
  ) =>
    new OptimError(`loadStateDict: ${message}`, {
      code: 'state-dict-mismatch',
      expected,
      actual,
      fix,
      ...(parameter === undefined ? {} : { parameter: String(parameter) }),
    });
  if (stateDict?.format !== FORMAT) {
    throw mismatch(
      'not an optimizer state dict.',
      FORMAT,
      stateDict?.format,
      'pass what stateDict() returned.',
    );
  }
  if (stateDict.optimizer !== kind) {
    throw mismatch(
      `the state dict was saved by ${stateDict.optimizer}, this optimizer is ${kind}.`,
      kind,
      stateDict.optimizer,
      'load it into the same kind of optimizer.',
    );
  }
  if (stateDict.paramGroups.length !== groups.length) {
    throw mismatch(
      `the state dict has ${stateDict.paramGroups.length} param groups, this optimizer has ${groups.length}.`,
      groups.length,
      stateDict.paramGroups.length,
      'build the optimizer with the same groups as the one that saved the state.',
    );
  }
  const byPosition: Parameter[] = [];
  const hyperparameters = groups.map((group, index) => {
    const saved = stateDict.paramGroups[index]!;
    if (saved.params.length !== group.params.length) {
      throw mismatch(
        `param group ${index} has ${group.params.length} parameters, the saved one had ${saved.params.length}.`,
        group.params.length,
        saved.params.length,
        'build the groups from the same parameters in the same order.',
      );
    }
    group.params.forEach((param, slot) => {
      const savedName = saved.paramNames[slot] ?? '';
      if (param.name !== '' && savedName !== '' && param.name !== savedName) {
        throw mismatch(
          `position ${saved.params[slot]} (group ${index}) holds '${param.name}' here but '${savedName}' in the state dict.`,
          savedName,
          param.name,
          'build the groups from the same parameters in the same order.',
          param,
        );
      }
      byPosition[saved.params[slot]!] = param;
    });
    for (const key of Object.keys(saved.hyperparameters)) {
      if (!(key in defaults)) {
        throw mismatch(
          `param group ${index} has unknown hyperparameter '${key}'.`,
          Object.keys(defaults),
          key,
          'load a state dict saved by this optimizer kind and version.',
        );
      }
    }
    return copyHyperparameters(saved.hyperparameters);
  });
  const state = new Map<Parameter, ParameterState>();
  for (const [key, entry] of Object.entries(stateDict.state)) {
    const param = byPosition[Number(key)];
    if (param === undefined) {
      throw mismatch(
        `state for position ${key}, which no param group lists.`,
        `positions 0..${byPosition.length - 1}`,
        key,
        'pass what stateDict() returned, unmodified.',
      );
    }
    if (!shapesEqual(entry.shape, param.shape)) {
      throw mismatch(
        `${param} has shape ${formatShape(param.shape)}, its saved state is for shape ${formatShape(entry.shape)}.`,
        param.shape,
        entry.shape,
        'load state saved for the same model.',
        param,
      );
    }
    if (entry.numel !== param.data.numel) {
      throw mismatch(
        `${param}'s data has ${param.data.numel} elements here, its saved state covers ${entry.numel}.`,
        param.data.numel,
        entry.numel,
        'load state saved under the same sharding (same world size and rank), or re-shard the state first.',
        param,
      );
    }
    const parameterState = new ParameterState(entry.numel);
    parameterState.step = entry.step;
    for (const [name, buffer] of Object.entries(entry.buffers)) {
      if (buffer.length !== entry.numel) {
        throw mismatch(
          `${param}'s saved buffer '${name}' has ${buffer.length} elements, expected ${entry.numel}.`,
          entry.numel,
          buffer.length,
          'pass what stateDict() returned, unmodified.',
          param,
        );
      }
      if (!copy && !(buffer instanceof Float32Array)) {
        throw mismatch(
          `${param}'s saved buffer '${name}' is not a Float32Array; a load without copies keeps the buffers as they are.`,
          'Float32Array',
          Object.prototype.toString.call(buffer),
          'pass Float32Array buffers, or load with copies (the default).',
          param,
        );
      }
      parameterState.buffers.set(name, copy ? Float32Array.from(buffer) : buffer);
    }
    state.set(param, parameterState);
  }
  return { hyperparameters, state };
}

function copyHyperparameters(
  values: Record<string, HyperparameterValue>,
): Record<string, HyperparameterValue> {
  const copy: Record<string, HyperparameterValue> = {};
  for (const [key, value] of Object.entries(values)) {
    copy[key] = Array.isArray(value) ? ([value[0], value[1]] as const) : value;
  }
  return copy;
}

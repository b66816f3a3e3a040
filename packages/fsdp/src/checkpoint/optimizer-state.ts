import type { HyperparameterValue, OptimizerStateDict } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import { CheckpointError } from './checkpoint-error';
import type { SavedParameterState } from './checkpoint-format';
import type { ModelHandle } from './model-shards';

/**
 * The part of an optimizer a checkpoint uses: its kind, its parameters in position order, and its
 * state dicts (`Optimizer` from @fsdp-ts/optim has all of them).
 */
export interface CheckpointOptimizer {
  readonly kind: string;
  readonly parameters: Parameter[];
  readonly paramGroups: readonly { readonly params: readonly Parameter[] }[];
  stateDict(): OptimizerStateDict;
  loadStateDict(stateDict: OptimizerStateDict): void;
}

/** A parameter's state buffer and where it starts in the handle's flat shard (elements). */
export interface StatePiece {
  offset: number;
  values: Float32Array;
}

/**
 * One handle's optimizer state as flat buffers aligned with its flat parameter shard: per buffer
 * name, the pieces in the shard ([data.length] elements once the gaps are filled with zeros).
 */
export interface FlatOptimizerState {
  buffers: Map<string, StatePiece[]>;
}

/**
 * [Note: flat optimizer state]
 * Optimizer state follows the parameter shard element by element (see [Note: state follows data]
 * in @fsdp-ts/optim), so each state buffer of a handle is stored as a flat shard laid out exactly
 * like the flat parameter: element e of parameter p's state goes where element e of p's shard
 * lives. Resharding state is then the same index computation as resharding parameters.
 */
export function flattenOptimizerState(
  optimizer: CheckpointOptimizer,
  handles: readonly ModelHandle[],
  locations: Map<Parameter, { entry: ModelHandle; index: number }>,
): { flat: Map<ModelHandle, FlatOptimizerState>; parameters: Record<string, SavedParameterState> } {
  const dict = optimizer.stateDict();
  const positions = optimizer.parameters;
  const flat = new Map<ModelHandle, FlatOptimizerState>(
    handles.map((entry) => [entry, { buffers: new Map() }]),
  );
  const parameters: Record<string, SavedParameterState> = {};
  for (const [key, state] of Object.entries(dict.state)) {
    const parameter = positions[Number(key)]!;
    const location = locations.get(parameter);
    if (location === undefined) {
      throw new CheckpointError(`The optimizer steps ${parameter}, which the FSDP model does not manage.`, {
        reason: 'optimizer-mismatch',
        expected: 'an optimizer over model.parameters()',
        actual: String(parameter),
        fix: 'build the optimizer from the wrapped model (parameters of ignored modules are not checkpointed).',
      });
    }
    const { entry, index } = location;
    const name = entry.handle.layout.parameters[index]!.names[0]!;
    const offset = entry.handle.intersections[index]!.offsetInShard;
    const target = flat.get(entry)!;
    for (const [buffer, values] of Object.entries(state.buffers)) {
      const pieces = target.buffers.get(buffer) ?? [];
      pieces.push({ offset, values });
      target.buffers.set(buffer, pieces);
    }
    parameters[name] = { step: state.step, buffers: Object.keys(state.buffers).sort() };
  }
  return { flat, parameters };
}

/** Each param group's hyperparameters and parameter names, read without copying any state. */
export function describeGroups(
  optimizer: CheckpointOptimizer,
): { hyperparameters: Record<string, HyperparameterValue>; paramNames: string[] }[] {
  return optimizer.paramGroups.map((group) => {
    const { params, ...hyperparameters } = group as { params: readonly Parameter[] } & Record<
      string,
      unknown
    >;
    return {
      hyperparameters: JSON.parse(JSON.stringify(hyperparameters)) as Record<string, HyperparameterValue>,
      paramNames: params.map((parameter) => parameter.name),
    };
  });
}

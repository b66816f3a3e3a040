import type {
  FlatShard,
  OptimizerGroupDescription,
  OptimizerReader,
  SavedParameterState,
  ShardedOptimizerState,
  StagedOptimizerState,
  StatePiece,
} from '@fsdp-ts/checkpoint';
import type { BaseOptions, HyperparameterValue, Optimizer, ParameterStateEntry } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type { ParameterLocations } from './checkpoint-state';

type Pieces = ReadonlyMap<Parameter, { offsetInParam: number; length: number }>;

/** Each param group's hyperparameters and its parameters' checkpoint names. */
function describeGroups(
  optimizer: Optimizer<BaseOptions>,
  locations: ParameterLocations,
): OptimizerGroupDescription[] {
  return optimizer.paramGroups.map((group) => {
    const { params, ...hyperparameters } = group as unknown as { params: readonly Parameter[] } & Record<
      string,
      unknown
    >;
    return {
      hyperparameters: JSON.parse(JSON.stringify(hyperparameters)) as Record<string, HyperparameterValue>,
      paramNames: params.map((parameter) => locations.get(parameter)!.name),
    };
  });
}

/**
 * The optimizer's state as fsdp writes it: per bucket slice, each state buffer as pieces at offsets
 * of the slice ([Note: flat optimizer state] in @fsdp-ts/checkpoint). The optimizer steps this rank's
 * piece of each parameter (its shard part, or all of it under 'replicate'); only the part inside
 * this rank's slice is written, so under 'replicate' each rank writes 1/W of the state.
 */
export function describeOptimizerState(
  optimizer: Optimizer<BaseOptions>,
  locations: ParameterLocations,
  pieces: Pieces,
): ShardedOptimizerState {
  const dict = optimizer.stateDict();
  const buffers = new Map<FlatShard, Map<string, StatePiece[]>>();
  const parameters: Record<string, SavedParameterState> = {};
  for (const [key, entry] of Object.entries(dict.state)) {
    const parameter = optimizer.parameters[Number(key)]!;
    const { shard, index, name } = locations.get(parameter)!;
    const piece = pieces.get(parameter)!;
    const slice = shard.intersections[index]!;
    const start = Math.max(piece.offsetInParam, slice.offsetInParam);
    const end = Math.min(piece.offsetInParam + piece.length, slice.offsetInParam + slice.length);
    parameters[name] = { step: entry.step, buffers: Object.keys(entry.buffers).sort() };
    if (end <= start) continue;
    const target = buffers.get(shard) ?? new Map<string, StatePiece[]>();
    buffers.set(shard, target);
    for (const [buffer, values] of Object.entries(entry.buffers)) {
      const list = target.get(buffer) ?? [];
      list.push({
        offset: slice.offsetInShard + (start - slice.offsetInParam),
        values: values.subarray(start - piece.offsetInParam, end - piece.offsetInParam),
      });
      target.set(buffer, list);
    }
  }
  return { kind: optimizer.kind, groups: describeGroups(optimizer, locations), parameters, buffers };
}

/**
 * Reads the optimizer state for the pieces this rank's optimizer steps (the load's description
 * holds them: this rank's slice under the sharded strategies, every weight under 'replicate').
 */
export function optimizerReader(
  optimizer: Optimizer<BaseOptions>,
  locations: ParameterLocations,
  pieces: Pieces,
): OptimizerReader {
  return {
    kind: optimizer.kind,
    groups: describeGroups(optimizer, locations),
    stage: (staged: StagedOptimizerState) => {
      const state: Record<number, ParameterStateEntry> = {};
      optimizer.parameters.forEach((parameter, position) => {
        const { shard, index, name } = locations.get(parameter)!;
        const saved = staged.saved.parameters[staged.matched.get(name)!.name];
        if (saved === undefined) return;
        const piece = pieces.get(parameter)!;
        const slice = shard.intersections[index]!;
        const from = slice.offsetInShard + (piece.offsetInParam - slice.offsetInParam);
        const buffers: Record<string, Float32Array> = {};
        for (const buffer of saved.buffers)
          buffers[buffer] = staged.buffers
            .get(shard)!
            .get(buffer)!
            .slice(from, from + piece.length);
        state[position] = {
          name: parameter.name,
          shape: [...parameter.shape],
          numel: piece.length,
          step: saved.step,
          buffers,
        };
      });
      let position = 0;
      const paramGroups = optimizer.paramGroups.map((group, index) => ({
        hyperparameters: staged.saved.groups[index]!.hyperparameters,
        params: group.params.map(() => position++),
        paramNames: group.params.map((parameter) => parameter.name),
      }));
      const dict = {
        format: 'fsdp-ts/optim-state@1' as const,
        optimizer: optimizer.kind,
        state,
        paramGroups,
      };
      return () => optimizer.loadStateDict(dict);
    },
  };
}

import type { HyperparameterValue, OptimizerStateDict, StateDictOptions } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import { CheckpointError } from '../errors';
import type { SavedParameterState } from '../format/checkpoint-format';
import type { FlatShard } from './flat-shard';

/**
 * The part of an optimizer a checkpoint uses: its kind, its parameters in position order, and its
 * state dicts (`Optimizer` from @fsdp-ts/optim has all of them). Checkpoints ask for state dicts
 * without copies (`{ copy: false }`, see [Note: checkpoints stream the optimizer state]); an
 * optimizer that ignores the option still works, at the cost of its copies.
 */
export interface CheckpointOptimizer {
  readonly kind: string;
  readonly parameters: Parameter[];
  readonly paramGroups: readonly { readonly params: readonly Parameter[] }[];
  /** The optimizer's state dict. */
  stateDict(options?: StateDictOptions): OptimizerStateDict;
  /** Loads a state dict returned by `stateDict`. */
  loadStateDict(stateDict: OptimizerStateDict, options?: StateDictOptions): void;
}

/** A parameter's state buffer and where it starts in the flat shard (elements). */
export interface StatePiece {
  offset: number;
  values: Float32Array;
}

/**
 * [Note: streamed values]
 * Values a checkpoint writes without their being in memory at once: state kept elsewhere (an
 * offload store on disk) is produced when the writer reaches it. `stream(sink)` calls `sink`
 * with consecutive runs covering elements [0, length) in order; each run is a view the producer
 * may reuse once `sink` returns (the writer writes and hashes it before returning), so a
 * producer holds one bounded buffer whatever the state's size. The bytes written are those of
 * the same values given as an array: a checkpoint does not say how its values were produced.
 */
export interface StreamedValues {
  /** Elements in all. */
  readonly length: number;
  /** Hands the values to `sink` in order, a run at a time; throws to fail the save. */
  stream(sink: (run: Float32Array) => void): void;
}

/** A state buffer produced as the writer reaches it ([Note: streamed values]), `offset` elements into the shard. */
export interface StreamedPiece {
  offset: number;
  values: StreamedValues;
}

/** A piece the writer writes: in memory, or streamed. */
export type WrittenPiece = StatePiece | StreamedPiece;

/**
 * Where an optimizer's state buffers are when the optimizer does not keep them (an offload,
 * [Note: state dicts without buffers] in @fsdp-ts/optim): their names and values per parameter
 * position, produced when written ([Note: streamed values]).
 */
export interface OptimizerStateSource {
  /** The buffers the parameter at `position` has state in. */
  bufferNames(position: number): readonly string[];
  /** The values of one of them, produced when the writer reaches them. */
  values(position: number, name: string): StreamedValues;
}

/** One param group: its hyperparameters and its parameters' names. */
export interface OptimizerGroupDescription {
  hyperparameters: Record<string, HyperparameterValue>;
  paramNames: string[];
}

/**
 * An optimizer's state as a checkpoint writes it, described without the optimizer (see
 * [Note: sharded model state]): its kind and groups, each parameter's step and buffer names (by
 * the parameter's first name), and each flat shard's buffers as pieces of that shard.
 */
export interface ShardedOptimizerState {
  readonly kind: string;
  readonly groups: readonly OptimizerGroupDescription[];
  readonly parameters: Record<string, SavedParameterState>;
  readonly buffers: ReadonlyMap<FlatShard, ReadonlyMap<string, WrittenPiece[]>>;
}

/**
 * [Note: checkpoints stream the optimizer state]
 * A checkpoint never copies the optimizer state (8 bytes per parameter for Adam, as much as the
 * state itself, which a rank under a memory cap does not have to spare): saving writes each state
 * buffer from the array the optimizer keeps (`stateDict({ copy: false })`), and loading reads
 * each buffer straight into the array the optimizer will keep: the live one when the optimizer
 * already has state of that size, else a new one, handed over with `loadStateDict(dict, { copy:
 * false })`. Written to only after every rank has verified what it will read (see
 * [Note: loads verify, agree, then read in place]).
 *
 * [Note: flat optimizer state]
 * Optimizer state follows the parameter shard element by element (see [Note: state follows data]
 * in @fsdp-ts/optim), so each state buffer of a flat parameter is stored as a flat shard laid out
 * exactly like the flat parameter: element e of parameter p's state goes where element e of p's
 * shard lives. Resharding state is then the same index computation as resharding parameters.
 */
export function flattenOptimizerState(
  optimizer: CheckpointOptimizer,
  locations: ReadonlyMap<Parameter, { shard: FlatShard; index: number }>,
  source?: OptimizerStateSource,
): ShardedOptimizerState {
  // The live buffers, not copies: see [Note: checkpoints stream the optimizer state]. With the
  // state elsewhere, the steps alone, and each buffer streamed from there ([Note: streamed values]).
  const dict = optimizer.stateDict(source === undefined ? { copy: false } : { buffers: false });
  if (source !== undefined) {
    for (const [key, state] of Object.entries(dict.state)) {
      const position = Number(key);
      const streamed: Record<string, StreamedValues> = {};
      for (const name of source.bufferNames(position)) streamed[name] = source.values(position, name);
      (state as { buffers: Record<string, Float32Array | StreamedValues> }).buffers = streamed;
    }
  }
  const positions = optimizer.parameters;
  const buffers = new Map<FlatShard, Map<string, WrittenPiece[]>>();
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
    const { shard, index } = location;
    const name = shard.layout.parameters[index]!.names[0]!;
    const offset = shard.intersections[index]!.offsetInShard;
    const target = buffers.get(shard) ?? new Map<string, WrittenPiece[]>();
    buffers.set(shard, target);
    for (const [buffer, values] of Object.entries(state.buffers)) {
      const pieces = target.get(buffer) ?? [];
      pieces.push({ offset, values } as WrittenPiece);
      target.set(buffer, pieces);
    }
    parameters[name] = { step: state.step, buffers: Object.keys(state.buffers).sort() };
  }
  return { kind: optimizer.kind, groups: describeGroups(optimizer), parameters, buffers };
}

/** Each param group's hyperparameters and parameter names, read without copying any state. */
export function describeGroups(optimizer: CheckpointOptimizer): OptimizerGroupDescription[] {
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

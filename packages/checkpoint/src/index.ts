/**
 * Sharded state and its checkpoints: descriptions of flat-parameter shards, the checkpoint
 * format (atomic, checksummed, resharding writes and reads), safetensors headers and the state
 * dicts of flat layouts. Shared by @fsdp-ts/fsdp and @fsdp-ts/layers, as
 * torch.distributed.checkpoint sits beside FSDP.
 *
 * @packageDocumentation
 * @document ../README.md
 * @module @fsdp-ts/checkpoint
 */

// Errors.
export {
  CheckpointError,
  type CheckpointErrorCode,
  type CheckpointErrorDetails,
  type CheckpointErrorReason,
} from './errors';
// The format on disk, and the checkpoints under a root directory.
export {
  type CheckpointEntry,
  type CheckpointLog,
  findLatestCheckpoint,
  listCheckpoints,
} from './format/checkpoint-directory';
export {
  CHECKPOINT_FORMAT_VERSION,
  type CheckpointMetadata,
  type DataFileEntry,
  type SavedOptimizer,
  type SavedParameterState,
  type SavedReplicatedState,
  type Segment,
} from './format/checkpoint-format';
export type { CheckpointBuffer, CheckpointDocument, ReplicatedState } from './format/replicated-state';
// Writing and reading a checkpoint (collectives over the group that holds the shards).
export {
  type LoadedCheckpoint,
  type OptimizerReader,
  type ReadCheckpointOptions,
  readCheckpoint,
  type StagedOptimizerState,
} from './reader/read-checkpoint';
// Describing the state to save or load: flat shards and optimizer state as pieces of them.
export { type FlatShard, flatShard, type ShardedModelState } from './sharded-state/flat-shard';
export type {
  CheckpointOptimizer,
  OptimizerGroupDescription,
  ShardedOptimizerState,
  StatePiece,
  StreamedPiece,
  StreamedValues,
  WrittenPiece,
} from './sharded-state/optimizer-state';
export type { SavedLocation } from './sharded-state/saved-parameters';
// State dicts of flat layouts (plain objects; @fsdp-ts/fsdp makes and loads them from a model).
export {
  FSDP_OPTIM_STATE_DICT_FORMAT,
  type FsdpOptimParameterState,
  type FsdpOptimStateDict,
  type Piece,
  SHARDED_STATE_DICT_FORMAT,
  type ShardedHandleEntry,
  type ShardedParameterEntry,
  type ShardedStateDict,
  type StatefulOptimizer,
} from './state-dict/state-dict-formats';
export {
  type SavedCheckpoint,
  type WriteCheckpointOptions,
  writeCheckpoint,
} from './writer/write-checkpoint';

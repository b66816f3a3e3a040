import { mkdirSync, writeFileSync } from 'node:fs';
import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { BaseOptions, Optimizer } from '@fsdp-ts/optim';
import type { Parameter } from '@fsdp-ts/tensor';
import type { LayersModel } from '@tensorflow/tfjs-layers';
import { resolveSaveTarget } from '../internal/file-save-handler';
import {
  CHECKPOINT_FORMAT,
  type CheckpointIndex,
  checkpointPaths,
  type RankStateIndex,
} from './checkpoint-files';

export interface CheckpointSource {
  model: LayersModel;
  group: ProcessGroup;
  strategy: string;
  optimizer: Optimizer<BaseOptions>;
  parameters: readonly Parameter[];
  /** Per parameter (trainer order): the part this rank's optimizer steps. */
  pieces: readonly { offsetInParam: number; length: number }[];
}

/** Writes a checkpoint (see [Note: layers checkpoint layout]); every rank must call it. */
export async function saveShardedCheckpoint(directory: string, source: CheckpointSource): Promise<void> {
  const { group, optimizer } = source;
  mkdirSync(directory, { recursive: true });
  if (group.rank === 0)
    await source.model.save(resolveSaveTarget(`file://${checkpointPaths.model(directory)}`));
  const stateDict = optimizer.stateDict();
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  const index: RankStateIndex = { rank: group.rank, entries: [] };
  for (const [position, entry] of Object.entries(stateDict.state)) {
    const piece = source.pieces[Number(position)]!;
    const buffers: Record<string, number> = {};
    for (const [name, buffer] of Object.entries(entry.buffers)) {
      buffers[name] = bytes;
      chunks.push(new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength));
      bytes += buffer.byteLength;
    }
    index.entries.push({
      position: Number(position),
      step: entry.step,
      offsetInParam: piece.offsetInParam,
      numel: entry.numel,
      buffers,
    });
  }
  writeFileSync(checkpointPaths.rankData(directory, group.rank), Buffer.concat(chunks));
  writeFileSync(checkpointPaths.rankIndex(directory, group.rank), JSON.stringify(index));
  await group.barrier();
  if (group.rank === 0) {
    const checkpoint: CheckpointIndex = {
      format: CHECKPOINT_FORMAT,
      worldSize: group.size,
      strategy: source.strategy,
      optimizer: stateDict.optimizer,
      paramGroups: stateDict.paramGroups,
      parameters: source.parameters.map((parameter) => ({
        name: parameter.name,
        numel: parameter.numel,
        shape: [...parameter.shape],
      })),
    };
    writeFileSync(checkpointPaths.index(directory), JSON.stringify(checkpoint));
  }
  await group.barrier();
}

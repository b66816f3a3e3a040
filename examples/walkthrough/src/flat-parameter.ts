/**
 * Layer 3, @fsdp-ts/flat-param alone: two parameters flattened into one buffer sharded over two
 * ranks. Both ranks live in this process here; the all-gather is a copy of both shards (FSDP does
 * it with a collective).
 */
import { FlatParamHandle } from '@fsdp-ts/flat-param';
import { Parameter } from '@fsdp-ts/tensor';

function makeParameters() {
  return {
    weight: Parameter.fromArray([1, 2, 3, 4, 5, 6], [2, 3]),
    bias: Parameter.fromArray([7, 8], [2]),
  };
}

export function flatParameter(log: (line: string) => void) {
  const ranks = [0, 1].map((rank) => {
    const parameters = makeParameters();
    const handle = FlatParamHandle.create(
      [
        ['layer.weight', parameters.weight],
        ['layer.bias', parameters.bias],
      ],
      { rank, worldSize: 2 },
    );
    return { ...parameters, handle };
  });
  const shards = ranks.map(({ handle }) => handle.shardedBuffer().toArray());
  ranks.forEach(({ weight, bias }, rank) => {
    log(
      `rank ${rank}: shard ${JSON.stringify(shards[rank])}, weight.data ${JSON.stringify(weight.data.toArray())}, bias.data ${JSON.stringify(bias.data.toArray())}`,
    );
  });
  const rank0 = ranks[0]!;
  // The "all-gather": rank-major concatenation of the shards into the unsharded buffer.
  rank0.handle.unshardedBuffer().typedArray().set(shards.flat());
  rank0.handle.useUnshardedViews();
  const gathered = {
    weightShape: [...rank0.weight.data.shape],
    weight: rank0.weight.data.toArray(),
    bias: rank0.bias.data.toArray(),
  };
  log(
    `rank 0 gathered: weight ${JSON.stringify(gathered.weightShape)} ${JSON.stringify(gathered.weight)}, bias ${JSON.stringify(gathered.bias)}`,
  );
  rank0.handle.useShardedViews();
  rank0.handle.freeUnsharded();
  log(`rank 0 resharded: weight.data ${JSON.stringify(rank0.weight.data.shape)} again`);
  return { shards, gathered, shardedShape: [...rank0.weight.data.shape] };
}

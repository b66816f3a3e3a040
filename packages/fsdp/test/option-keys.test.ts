import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initProcessGroup, type ProcessGroup } from '@fsdp-ts/collectives';
import {
  FsdpError,
  type FsdpOptions,
  FullyShardedDataParallel,
  fullOptimStateDict,
  fullStateDict,
  loadCheckpoint,
  saveCheckpoint,
  summonFullParams,
} from '@fsdp-ts/fsdp';
import { backward, Linear, Module } from '@fsdp-ts/nn';
import { AdamW, OptimError, SGD } from '@fsdp-ts/optim';
import { initBackend } from '@fsdp-ts/tensor';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

class Block extends Module {
  readonly linear = this.registerModule('linear', new Linear(2, 2));
  forward(input: tf.Tensor): tf.Tensor {
    return this.linear.forward(input);
  }
}

class Model extends Module {
  readonly first = this.registerModule('first', new Block());
  readonly second = this.registerModule('second', new Block());
  forward(input: tf.Tensor): tf.Tensor {
    return this.second.forward(this.first.forward(input));
  }
}

/** The FsdpError `run` throws (the test fails if it throws nothing or something else). */
function fsdpErrorOf(run: () => unknown): FsdpError {
  try {
    run();
  } catch (error) {
    if (error instanceof FsdpError) return error;
    throw error;
  }
  throw new Error('expected an FsdpError, nothing was thrown');
}

describe('FSDP options are checked at run time (one-rank shm group)', () => {
  let group: ProcessGroup;
  beforeAll(async () => {
    await initBackend('cpu');
    group = await initProcessGroup({ backend: 'shm', timeoutMs: 10_000 });
  });
  afterAll(async () => {
    await group.destroy();
  });

  it("rejects the issue's PyTorch spelling instead of training the whole model as one unit", () => {
    const m = new Model();
    // As the issue wrote it (a JavaScript caller, or TypeScript past a cast): PyTorch's names.
    const pytorchStyle = { group, sharding_strategy: 'FULL_SHARD', auto_wrap_policy: [Block] };
    const error = fsdpErrorOf(() => new FullyShardedDataParallel(m, pytorchStyle as FsdpOptions));
    expect(error.code).toBe('unknown-option');
    expect(error.message).toContain("FullyShardedDataParallel got unknown options: 'sharding_strategy'");
    expect(error.message).toContain(
      "sharding_strategy is shardingStrategy here, with the values 'full-shard'",
    );
    expect(error.message).toContain('auto_wrap_policy is autoWrapPolicy here: an array of module classes');
    expect(error.actual).toEqual(['sharding_strategy', 'auto_wrap_policy']);
  });

  it("names fsdp-ts's equivalent of each PyTorch FSDP argument", () => {
    const equivalents: Record<string, string> = {
      sharding_strategy: 'shardingStrategy',
      auto_wrap_policy: 'autoWrapPolicy',
      use_orig_params: 'always keeps the original Parameters as views',
      cpu_offload: 'offload here',
      mixed_precision: 'mixedPrecision',
      backward_prefetch: 'backwardPrefetch',
      forward_prefetch: 'forwardPrefetch',
      limit_all_gathers: 'limitAllGathers',
      sync_module_states: 'syncModuleStates',
      device_id: 'no equivalent',
      param_init_fn: 'deferredInit',
      ignored_modules: 'ignoredModules',
      state_dict_type: 'fullStateDict(model) or shardedStateDict(model)',
      process_group: 'group',
    };
    for (const [name, equivalent] of Object.entries(equivalents)) {
      const error = fsdpErrorOf(
        () => new FullyShardedDataParallel(new Model(), { group, [name]: undefined }),
      );
      expect(error.code).toBe('unknown-option');
      expect(error.message).toContain(`'${name}' (`);
      expect(error.message).toContain(equivalent);
    }
  });

  it('names the nearest key for a typo, also inside mixedPrecision, a wrap policy and a preset', () => {
    const typo = fsdpErrorOf(
      () => new FullyShardedDataParallel(new Model(), { group, shardingStratgy: 'no-shard' } as FsdpOptions),
    );
    expect(typo.message).toContain("'shardingStratgy' (did you mean 'shardingStrategy'?)");
    const nested = fsdpErrorOf(
      () =>
        new FullyShardedDataParallel(new Model(), {
          group,
          mixedPrecision: { param_dtype: 'bfloat16' } as never,
        }),
    );
    expect(nested.message).toContain(
      "mixedPrecision got an unknown option: 'param_dtype' (PyTorch's param_dtype is paramDtype",
    );
    const policy = fsdpErrorOf(
      () =>
        new FullyShardedDataParallel(new Model(), { group, autoWrapPolicy: { min_num_params: 4 } as never }),
    );
    expect(policy.message).toContain('minNumParams');
    const preset = fsdpErrorOf(
      () =>
        new FullyShardedDataParallel(new Model(), {
          group,
          shardingStrategy: {
            name: 'mine',
            gradientReduction: 'reduce-scatter',
            reshardAfterForward: true,
            recompute: false,
            replicate: false,
            reshardAfterFoward: true,
          } as never,
        }),
    );
    expect(preset.message).toContain("did you mean 'reshardAfterForward'?");
  });

  it("maps PyTorch's strategy values to the built-in names", () => {
    for (const spelling of ['FULL_SHARD', 'ShardingStrategy.FULL_SHARD', 'full_shard']) {
      const error = fsdpErrorOf(
        () => new FullyShardedDataParallel(new Model(), { group, shardingStrategy: spelling as never }),
      );
      expect(error.code).toBe('invalid-option');
      expect(error.message).toContain("is 'full-shard' here");
    }
  });

  it('checks state-dict, summon and checkpoint options too, and accepts the known keys', async () => {
    const model = new FullyShardedDataParallel(new Model(), { group, autoWrapPolicy: [Block] });
    expect(model.units.length).toBe(3);
    const optimizer = new SGD(model.parameters(), { lr: 0.1 });
    expect(fsdpErrorOf(() => fullStateDict(model, { rank0_only: true } as never)).message).toContain(
      "PyTorch's rank0_only is rank0Only here",
    );
    expect(
      fsdpErrorOf(() => fullOptimStateDict(model, optimizer, { rankZeroOnly: true } as never)).code,
    ).toBe('unknown-option');
    expect(
      fsdpErrorOf(() => summonFullParams(model, () => 0, { writeBack: false } as never)).message,
    ).toContain("did you mean 'writeback'?");
    const root = mkdtempSync(join(tmpdir(), 'fsdp-option-keys-'));
    try {
      expect(fsdpErrorOf(() => saveCheckpoint(root, { model, step: 1, kepp: 2 } as never)).message).toContain(
        "did you mean 'keep'?",
      );
      const saved = saveCheckpoint(root, { model, optimizer, step: 1, keep: 1, extra: { anything: true } });
      expect(
        fsdpErrorOf(() => loadCheckpoint(saved.path, { model, optimiser: optimizer } as never)).message,
      ).toContain("did you mean 'optimizer'?");
      expect(loadCheckpoint(saved.path, { model, optimizer }).step).toBe(1);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    expect(Object.keys(fullStateDict(model, { rank0Only: false })).length).toBeGreaterThan(0);
  });

  it('checks offload: a directory for disk, parameters on disk only sharded, an attached optimizer that can offload', () => {
    const build = (offload: unknown) =>
      new FullyShardedDataParallel(new Model(), { group, offload } as FsdpOptions);
    const noDirectory = fsdpErrorOf(() => build({ optimizerState: 'disk' }));
    expect(noDirectory.code).toBe('invalid-option');
    expect(noDirectory.message).toContain('offload.directory');
    expect(fsdpErrorOf(() => build({ optimizerState: 'gpu' })).message).toContain(
      "'none', 'memory' or 'disk'",
    );
    expect(fsdpErrorOf(() => build({ parameters: 'disk' })).message).toContain('offload.directory');
    const noShard = fsdpErrorOf(
      () =>
        new FullyShardedDataParallel(new Model(), {
          group,
          shardingStrategy: 'no-shard',
          offload: { parameters: 'disk', directory: tmpdir() },
        }),
    );
    expect(noShard.code).toBe('invalid-option');
    expect(noShard.message).toContain("shardingStrategy 'no-shard' keeps whole ones");
    const foreign = fsdpErrorOf(() => build({ offload_param: { device: 'nvme' } }));
    expect(foreign.code).toBe('unknown-option');
    expect(foreign.message).toContain("offload_param is offload: { parameters: 'disk', directory } here");
    expect(
      fsdpErrorOf(() =>
        new FullyShardedDataParallel(new Model(), { group }).offloadOptimizerState(
          new AdamW(new Model().parameters()),
        ),
      ).code,
    ).toBe('invalid-option');

    const model = build({ optimizerState: 'memory' });
    // SGD's momentum starts as a copy of the gradient, so its state cannot start as offloaded zeros.
    expect(() => model.offloadOptimizerState(new SGD(model.parameters(), { lr: 0.1 }))).toThrow(OptimError);
    const input = tf.ones([1, 2]);
    const unattached = fsdpErrorOf(() => backward(model, () => tf.sum(model.forward(input) as tf.Tensor)));
    expect(unattached.message).toContain('model.offloadOptimizerState(optimizer)');
    const optimizer = model.offloadOptimizerState(new AdamW(model.parameters()));
    backward(model, () => tf.sum(model.forward(input) as tf.Tensor));
    optimizer.step();
    expect(model.offloadStatistics.bytesWritten).toBeGreaterThan(0);
    expect(fsdpErrorOf(() => model.offloadOptimizerState(new AdamW(model.parameters()))).code).toBe(
      'wrong-state',
    );
    input.dispose();
  });
});

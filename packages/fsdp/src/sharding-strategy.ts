import type { ProcessGroup } from '@fsdp-ts/collectives';
import type { OptionKeys } from '@fsdp-ts/errors';
import { FsdpError } from './errors';
import { checkFsdpOptionKeys } from './internal/check-option-keys';

/**
 * [Note: strategies are presets]
 * A sharding strategy is a name for a preset of independent settings; options are resolved once
 * into `ShardingSettings` and the runtime reads only those (never the name), as PyTorch FSDP2
 * turns a strategy into `reshard_after_forward` plus a 1-D or 2-D mesh. The four names below are
 * the built-in presets; a `ShardingPreset` object passed as `shardingStrategy` is a new one.
 * This table is the only place that maps names to behaviour.
 *
 * - `full-shard`: parameters, gradients and optimizer state sharded; a unit's parameters are
 *   gathered for its forward, freed, and gathered again for its backward (ZeRO-3); activations
 *   are kept (see [Note: released parameters]), recomputation is opt-in per unit
 *   (`activationCheckpointing`).
 * - `shard-grad-op`: gathered for forward and kept until after backward; gradients and optimizer
 *   state sharded (ZeRO-2).
 * - `no-shard`: plain data parallel; gradients all-reduced per unit (one bucket per unit).
 * - `hybrid-shard`: full-shard within a shard group (e.g. one node), replicated across replica
 *   groups: reduce-scatter in the shard group, then all-reduce of the sharded gradient between
 *   replicas. See hybrid-shard.ts.
 */
export type ShardingStrategy = 'full-shard' | 'shard-grad-op' | 'no-shard' | 'hybrid-shard';

/** How gradients are averaged over the (shard) group after backward. */
export type GradientReduction = 'reduce-scatter' | 'all-reduce';

/** The settings a strategy stands for; a new strategy is a new preset (CONTRIBUTING: add a strategy). */
export interface ShardingPreset {
  /** Recorded in checkpoints and sharded state dicts. */
  readonly name: string;
  /**
   * 'reduce-scatter': parameters, gradients and optimizer state are sharded over the group.
   * 'all-reduce': every rank holds whole parameters (world-size-1 layouts) and gradients are
   * all-reduced in place (plain data parallel).
   */
  readonly gradientReduction: GradientReduction;
  /** Free a unit's gathered parameters after its forward (gather again for its backward). */
  readonly reshardAfterForward: boolean;
  /**
   * Keep only a unit's inputs in forward and re-run its forward in backward (activation
   * checkpointing) for every unit; per unit, use the `activationCheckpointing` option instead.
   */
  readonly recompute: boolean;
  /** The reduced gradient shards are averaged again over a replicate group (hybrid sharding, a 2-D mesh). */
  readonly replicate: boolean;
}

/** What the runtime reads: the preset resolved against the groups. */
export interface ShardingSettings {
  readonly name: string;
  readonly gradientReduction: GradientReduction;
  /** gradientReduction === 'reduce-scatter': Parameters point at shards between steps. */
  readonly shardParameters: boolean;
  readonly reshardAfterForward: boolean;
  readonly recompute: boolean;
  /** The replicate group of hybrid sharding; null for a 1-D mesh. */
  readonly replicateGroup: ProcessGroup | null;
}

/** Each sharding strategy's preset: gradient reduction, resharding after forward, recompute, replication. */
export const shardingPresets: Readonly<Record<ShardingStrategy, ShardingPreset>> = {
  'full-shard': {
    name: 'full-shard',
    gradientReduction: 'reduce-scatter',
    reshardAfterForward: true,
    recompute: false,
    replicate: false,
  },
  'shard-grad-op': {
    name: 'shard-grad-op',
    gradientReduction: 'reduce-scatter',
    reshardAfterForward: false,
    recompute: false,
    replicate: false,
  },
  'no-shard': {
    name: 'no-shard',
    gradientReduction: 'all-reduce',
    reshardAfterForward: false,
    recompute: false,
    replicate: false,
  },
  'hybrid-shard': {
    name: 'hybrid-shard',
    gradientReduction: 'reduce-scatter',
    reshardAfterForward: true,
    recompute: false,
    replicate: true,
  },
};

/** Every sharding strategy's name. */
export const shardingStrategies = Object.keys(shardingPresets) as readonly ShardingStrategy[];

/** The keys of ShardingPreset ([Note: option keys] in @fsdp-ts/errors). */
const shardingPresetKeys = {
  name: true,
  gradientReduction: true,
  reshardAfterForward: true,
  recompute: true,
  replicate: true,
} as const satisfies OptionKeys<ShardingPreset>;

/**
 * The built-in strategy PyTorch's spelling of a name stands for: 'FULL_SHARD',
 * 'ShardingStrategy.FULL_SHARD', 'full_shard', 'fullShard' → 'full-shard' (case, '_' and '-'
 * ignored, an enum prefix dropped); undefined when none matches.
 */
function builtInSpelledAs(name: string): ShardingStrategy | undefined {
  const normalized = (name.split('.').pop() ?? name).replace(/[-_]/g, '').toLowerCase();
  return shardingStrategies.find((strategy) => strategy.replace(/-/g, '') === normalized);
}

/** The preset of a strategy name or object (default full-shard); checks that the runtime supports it. */
export function resolveShardingPreset(
  strategy: ShardingStrategy | ShardingPreset | undefined,
): ShardingPreset {
  if (typeof strategy === 'object' && strategy !== null) {
    checkPreset(strategy);
    return strategy;
  }
  const name = strategy ?? 'full-shard';
  if (!Object.hasOwn(shardingPresets, name)) {
    const meant = typeof name === 'string' ? builtInSpelledAs(name) : undefined;
    throw new FsdpError(
      meant === undefined
        ? `Unknown sharding strategy ${JSON.stringify(name)}.`
        : `Unknown sharding strategy ${JSON.stringify(name)}: PyTorch's ${name.split('.').pop()} is '${meant}' here.`,
      {
        code: 'invalid-option',
        expected: shardingStrategies,
        actual: name,
        fix:
          meant === undefined
            ? `use one of ${shardingStrategies.join(', ')}, or pass a ShardingPreset object.`
            : `pass shardingStrategy: '${meant}'.`,
      },
    );
  }
  return shardingPresets[name];
}

/** Combinations the runtime implements (a preset outside them fails here, not mid-step). */
function checkPreset(preset: ShardingPreset): void {
  checkFsdpOptionKeys(
    'FullyShardedDataParallel shardingStrategy (a ShardingPreset)',
    preset,
    shardingPresetKeys,
  );
  const problem = presetProblem(preset);
  if (problem === null) return;
  throw new FsdpError(`Sharding preset ${JSON.stringify(preset.name)}: ${problem}`, {
    code: 'invalid-option',
    expected:
      "{ name: string, gradientReduction: 'reduce-scatter' | 'all-reduce', reshardAfterForward, recompute, replicate: boolean } in a supported combination",
    actual: preset,
    fix: 'start from one of shardingPresets and change one setting at a time.',
  });
}

function presetProblem(preset: ShardingPreset): string | null {
  if (typeof preset.name !== 'string' || preset.name.length === 0) return 'name must be a non-empty string.';
  if (preset.gradientReduction !== 'reduce-scatter' && preset.gradientReduction !== 'all-reduce')
    return `gradientReduction must be 'reduce-scatter' or 'all-reduce', not ${JSON.stringify(preset.gradientReduction)}.`;
  for (const key of ['reshardAfterForward', 'recompute', 'replicate'] as const)
    if (typeof preset[key] !== 'boolean') return `${key} must be a boolean.`;
  if (preset.gradientReduction === 'all-reduce' && (preset.reshardAfterForward || preset.replicate))
    return "'all-reduce' keeps whole parameters on every rank: reshardAfterForward and replicate must be false.";
  return null;
}

/** The settings the runtime reads. */
export function shardingSettings(
  preset: ShardingPreset,
  replicateGroup: ProcessGroup | null,
): ShardingSettings {
  return {
    name: preset.name,
    gradientReduction: preset.gradientReduction,
    shardParameters: preset.gradientReduction === 'reduce-scatter',
    reshardAfterForward: preset.reshardAfterForward,
    recompute: preset.recompute,
    replicateGroup,
  };
}

import { describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/index.js';
import { parseLaunchArguments } from '../src/launcher/launch-options.js';

function launchError(argv: string[]): CollectiveError {
  try {
    parseLaunchArguments(argv, {});
  } catch (error) {
    if (error instanceof CollectiveError) return error;
    throw error;
  }
  throw new Error(`expected ${argv.join(' ')} to be rejected`);
}

describe("fsdp-run's flags are checked before parsing", () => {
  it("maps each torchrun flag (either spelling) to fsdp-run's, or says there is none", () => {
    const cases: [string[], string][] = [
      [['--nproc_per_node', '2'], '--nproc-per-node here'],
      [['--nproc-per-node', '1', '--nnodes', '2', '--node_rank=1'], '--node-rank here'],
      [['--nproc-per-node', '1', '--master_addr', '10.0.0.1'], '--master-addr here'],
      [['--nproc-per-node', '1', '--master_port', '29500'], '--master-port here'],
      [['--nproc-per-node', '1', '--max_restarts', '3'], '--max-restarts here'],
      [['--nproc-per-node', '1', '--rdzv_endpoint', 'host:29400'], '--master-addr HOST --master-port PORT'],
      [['--nproc-per-node', '1', '--rdzv-endpoint=host:29400'], '--master-addr HOST --master-port PORT'],
      [['--nproc-per-node', '1', '--rdzv_backend', 'c10d'], 'no equivalent'],
      [['--nproc-per-node', '1', '--rdzv_id', '7'], 'no equivalent'],
      [['--nproc-per-node', '1', '--standalone'], 'a single-node job is the default'],
    ];
    for (const [flags, equivalent] of cases) {
      const error = launchError([...flags, 'train.js']);
      expect(error.code).toBe('unknown-option');
      expect(error.message).toContain(equivalent);
    }
  });

  it('names the nearest flag for a typo and leaves the script its own flags', () => {
    expect(launchError(['--nproc-per-node', '1', '--grace', '3', 'train.js']).message).toContain(
      "did you mean '--grace-period'?",
    );
    const options = parseLaunchArguments(
      ['--nproc-per-node=2', '--secure', '--timeout', '5', 'train.js', '--nproc_per_node', '--lr=1'],
      {},
    );
    expect(options.nprocPerNode).toBe(2);
    expect(options.scriptArguments).toEqual(['--nproc_per_node', '--lr=1']);
  });
});

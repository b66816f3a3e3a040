import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { bundleLauncher, launch } from './launcher-harness.js';
import { temporaryDirectory } from './support/fixtures.js';

beforeAll(async () => {
  await bundleLauncher();
});

describe('fsdp-run with torchrun flags (the real launcher)', () => {
  it('names the fsdp-run flag, exits non-zero and starts no rank', async () => {
    const directory = temporaryDirectory('fsdp-run-flags-');
    const marker = join(directory, 'started');
    const script = join(directory, 'train.mjs');
    writeFileSync(
      script,
      `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'x');\n`,
    );
    const job = launch(['--nproc_per_node', '2', '--standalone', script]);
    const { code } = await job.exited;
    expect(code).toBe(2);
    expect(job.stderr()).toContain(
      "unknown flag '--nproc_per_node' (torchrun's --nproc_per_node is --nproc-per-node here",
    );
    expect(job.stdout()).toBe('');
    expect(existsSync(marker)).toBe(false);
  });
});

/**
 * The PyTorch peer (torch-mat-mul.py) as a long-lived child, so its products interleave with the
 * tfjs ones in one run. Available when /usr/bin/python3 imports torch (Debian: python3-torch, with
 * libopenblas0-pthread for the same OpenBLAS the native kernel loads); TORCH=0 skips it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const PYTHON = '/usr/bin/python3';

export interface TorchMatMul {
  readonly description: string;
  /** CPU milliseconds of one n x n product. */
  cpuMs(size: number): Promise<number>;
  close(): void;
}

/** Starts the peer, or says why it cannot run. */
export async function startTorchMatMul(): Promise<TorchMatMul | { skipped: string }> {
  if (process.env.TORCH === '0') return { skipped: 'TORCH=0 was set' };
  if (!existsSync(PYTHON)) return { skipped: `${PYTHON} does not exist` };
  const probe = spawnSync(PYTHON, ['-c', 'import torch'], { encoding: 'utf8', timeout: 120_000 });
  if (probe.status !== 0)
    return {
      skipped: `${PYTHON} cannot import torch; on Debian: apt-get install python3-torch libopenblas0-pthread`,
    };
  const script = fileURLToPath(new URL('./torch-mat-mul.py', import.meta.url));
  const child = spawn(PYTHON, [script], {
    env: { ...process.env, OPENBLAS_NUM_THREADS: '1', OMP_NUM_THREADS: '1' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const waiting: ((line: string) => void)[] = [];
  lines.on('line', (line) => waiting.shift()?.(line));
  const next = () => new Promise<string>((resolve) => waiting.push(resolve));
  const description = await next();
  return {
    description,
    async cpuMs(size: number) {
      const reply = next();
      child.stdin.write(`${size}\n`);
      return Number(await reply);
    },
    close() {
      child.stdin.end();
    },
  };
}

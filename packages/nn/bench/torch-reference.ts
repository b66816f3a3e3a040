/**
 * The PyTorch reference (torch-gpt-training.py) as a long-lived child process, so its steps can
 * be interleaved with fsdp-ts's in one run. One thread on both sides: OPENBLAS_NUM_THREADS=1 and
 * torch.set_num_threads(1).
 */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface, type Interface } from 'node:readline';

export interface TorchSteps {
  stepMs: number[];
  cpuMs: number[];
  torch: string;
  blas: string[];
}

const PYTHON = '/usr/bin/python3';

export type TorchAvailability = { available: true } | { available: false; reason: string };

/** Whether a python3 that imports torch is there (TORCH=0 skips it on purpose). */
export function torchAvailability(): TorchAvailability {
  if (process.env.TORCH === '0') return { available: false, reason: 'TORCH=0 was set' };
  if (!existsSync(PYTHON)) return { available: false, reason: `${PYTHON} does not exist` };
  const probe = spawnSync(PYTHON, ['-c', 'import torch'], { encoding: 'utf8', timeout: 120_000 });
  if (probe.status !== 0) {
    const why = (probe.stderr ?? '').trim().split('\n').at(-1) ?? 'unknown error';
    return {
      available: false,
      reason: `${PYTHON} cannot import torch (${why}); on Debian: apt-get install python3-torch`,
    };
  }
  return { available: true };
}

export class TorchReference {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #lines: Interface;
  readonly #pending: ((line: string) => void)[] = [];

  /**
   * `flushDenormals`: the child calls `torch.set_flush_denormal(True)`. PyTorch's default keeps
   * subnormal floats, and this model's Adam second moments and late gradients reach them, where
   * every x86 float instruction that touches one is slow: measured, the default step costs about
   * twice the flushed one's CPU time. The default is what a user runs; the flushed one is the
   * harder peer, so the benchmark reports both.
   */
  constructor(options: { flushDenormals?: boolean } = {}) {
    const script = new URL('./torch-gpt-training.py', import.meta.url).pathname;
    this.#child = spawn(PYTHON, [script], {
      env: {
        ...process.env,
        OPENBLAS_NUM_THREADS: '1',
        OMP_NUM_THREADS: '1',
        BENCH_TORCH_FLUSH_DENORMAL: options.flushDenormals === true ? '1' : '0',
      },
    });
    this.#child.stderr.on('data', (chunk: Buffer) => process.stderr.write(chunk));
    this.#lines = createInterface({ input: this.#child.stdout });
    this.#lines.on('line', (line) => this.#pending.shift()?.(line));
  }

  /** Runs `steps` steps at [batch, seq] in the child (its model per shape is warmed on first use). */
  run(batch: number, seq: number, steps: number): Promise<TorchSteps> {
    return new Promise((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`the PyTorch reference exited with ${code}`));
      this.#child.once('exit', onExit);
      this.#pending.push((line) => {
        this.#child.off('exit', onExit);
        resolve(JSON.parse(line) as TorchSteps);
      });
      this.#child.stdin.write(`${batch} ${seq} ${steps}\n`);
    });
  }

  close(): void {
    this.#child.stdin.end('\n');
    this.#lines.close();
  }
}

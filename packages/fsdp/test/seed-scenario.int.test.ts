import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { initBackend } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import { describe, expect, it } from 'vitest';
import { fsdpRunArguments } from '../../collectives/test/helpers/rank-commands';
import { type SeedMode, SeedModel, seedOptimizer, trainSeed } from './fixtures/seed-model';

const rankScript = fileURLToPath(new URL('./fixtures/seed-scenario-rank.ts', import.meta.url));

interface RankReport {
  sameObjects: boolean;
  layerParameterCount: number;
  names: string[];
  losses: number[];
  pieces: Record<string, { offset: number; values: number[] }>;
}

/** Runs the scenario on 2 real processes through fsdp-run (tcp on loopback). */
function runWithLauncher(mode: SeedMode): Promise<RankReport[]> {
  const output = mkdtempSync(join(tmpdir(), 'fsdp-seed-'));
  const child = spawn(
    process.execPath,
    [...fsdpRunArguments(), '--nproc-per-node', '2', rankScript, mode, output],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  child.stdout.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    log += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => {
      if (code !== 0) reject(new Error(`fsdp-run exited with ${code}:\n${log}`));
      else
        resolve(
          [0, 1].map(
            (rank) => JSON.parse(readFileSync(join(output, `rank-${rank}.json`), 'utf8')) as RankReport,
          ),
        );
    });
  });
}

function reference(mode: SeedMode): { losses: number[]; values: Record<string, number[]> } {
  const model = new SeedModel();
  const optimizer = seedOptimizer(model, mode);
  const losses = trainSeed(model, (tokens: tf.Tensor) => model.forward(tokens), optimizer, 0, 4);
  return {
    losses,
    values: Object.fromEntries(model.namedParameters().map(([name, p]) => [name, p.data.toArray()])),
  };
}

describe('the seed scenario across 2 processes started by fsdp-run', () => {
  for (const mode of ['sgd-layer-only', 'param-groups'] as const) {
    it(`${mode}: optimizers built from model.module.<sub>.parameters() after wrapping train exactly that subset`, async () => {
      await initBackend('cpu');
      const initial = new SeedModel();
      const initialValues = Object.fromEntries(
        initial.namedParameters().map(([name, p]) => [name, p.data.toArray()]),
      );
      const expected = reference(mode);
      const reports = await runWithLauncher(mode);
      for (const report of reports) {
        expect(report.sameObjects).toBe(true);
        expect(report.layerParameterCount).toBe(2);
        expect(report.names).toEqual(Object.keys(initialValues)); // no wrapper prefixes
        report.losses.forEach((loss, step) => {
          // Each rank's loss is on its own half of the samples; their mean is the reference loss.
          expect(Number.isFinite(loss), `step ${step}`).toBe(true);
        });
      }
      reports[0]!.losses.forEach((loss, step) => {
        const mean = (loss + reports[1]!.losses[step]!) / 2;
        expect(Math.abs(mean - expected.losses[step]!)).toBeLessThanOrEqual(
          1e-5 * Math.abs(expected.losses[step]!),
        );
      });
      for (const [name, values] of Object.entries(expected.values)) {
        const assembled = new Array<number>(values.length).fill(Number.NaN);
        for (const report of reports) {
          const piece = report.pieces[name]!;
          piece.values.forEach((value, index) => {
            assembled[piece.offset + index] = value;
          });
        }
        values.forEach((value, index) => {
          // 1e-5 relative; values below 0.02 compared at 0.02 (summation order only differs).
          expect(Math.abs(assembled[index]! - value), `${name}[${index}]`).toBeLessThanOrEqual(
            1e-5 * Math.max(Math.abs(value), 0.02),
          );
        });
        const trained = name.startsWith('layer.') || (mode === 'param-groups' && name.startsWith('other.'));
        const changed = values.some((value, index) => value !== initialValues[name]![index]);
        expect(changed, `${name} ${trained ? 'trained' : 'untouched'}`).toBe(trained);
      }
    });
  }
});

/**
 * Offloaded optimizer state (offload.optimizerState 'memory' and 'disk') at W = 1, 2 and 3, thread
 * ranks over shm: 10 steps bitwise equal to the same run without offload (AdamW and LAMB), a
 * flipped byte in an offload file fails the step on every rank naming the file with the model
 * unchanged, and a resume from a checkpoint into an offloaded model equals the uninterrupted run.
 * One launch per world size runs every case (fixtures/offload-rank.ts).
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnThreadRanks } from '@fsdp-ts/collectives';
import { afterAll, describe, expect, it } from 'vitest';
import type { OffloadReport } from './fixtures/offload-rank';

const fixture = new URL('./fixtures/offload-rank.ts', import.meta.url);
const directories: string[] = [];

/** A step directory's files by name (their SHA-256); metadata.json parsed, without its time and its digest. */
function checkpointFiles(path: string): Record<string, unknown> {
  const files: Record<string, unknown> = {};
  for (const name of readdirSync(path).sort()) {
    const bytes = readFileSync(join(path, name));
    if (name !== 'metadata.json') files[name] = createHash('sha256').update(bytes).digest('hex');
    else {
      const { createdAt, metadataSha256, ...rest } = JSON.parse(bytes.toString('utf8'));
      expect(typeof createdAt).toBe('string');
      expect(metadataSha256).toMatch(/^[0-9a-f]{64}$/);
      files[name] = rest;
    }
  }
  return files;
}

afterAll(() => {
  for (const directory of directories) rmSync(directory, { recursive: true, force: true });
});

describe.each([1, 2, 3])('offloaded optimizer state and parameters at W = %i', (worldSize) => {
  let reports: OffloadReport[] = [];

  it('trains 10 steps bitwise equal to no offload (AdamW memory and disk, parameters on disk alone and with the state, LAMB disk)', async () => {
    const directory = mkdtempSync(join(tmpdir(), `fsdp-offload-${worldSize}-`));
    directories.push(directory);
    reports = (await spawnThreadRanks(worldSize, fixture, 'offloadRank', {
      args: { directory },
      timeoutMs: 240_000,
    })) as OffloadReport[];
    for (const report of reports) {
      const { runs } = report;
      expect(runs['adamw-memory']).toEqual(runs['adamw-none']);
      expect(runs['adamw-disk']).toEqual(runs['adamw-none']);
      expect(runs['lamb-disk']).toEqual(runs['lamb-none']);
      expect(runs['adamw-parameters']).toEqual(runs['adamw-none']);
      expect(runs['adamw-parameters-state']).toEqual(runs['adamw-none']);
      // The runs train (so equality is not of untouched models) and LAMB differs from AdamW.
      expect(runs['adamw-none']!.losses[9]!).toBeLessThan(runs['adamw-none']!.losses[0]!);
      expect(runs['lamb-none']!.pieces).not.toEqual(runs['adamw-none']!.pieces);
      // A step read and wrote the state: two bytes of moments per element, both ways.
      expect(report.lastStepBytes.read).toBeGreaterThan(0);
      expect(report.lastStepBytes.written).toBeGreaterThan(0);
    }
  }, 300_000);

  it('saves checkpoints byte-identical to those without offload, streaming the state through at most a chunk', () => {
    const saved = reports[0]!.saved;
    const reference = checkpointFiles(saved['adamw-none']!.path);
    expect(Object.keys(reference)).toContain('metadata.json');
    expect(Object.keys(reference).filter((name) => name.startsWith('shard-')).length).toBe(2 * worldSize);
    for (const name of ['adamw-memory', 'adamw-disk', 'adamw-parameters', 'adamw-parameters-state']) {
      expect(checkpointFiles(saved[name]!.path), name).toEqual(reference);
    }
    expect(checkpointFiles(saved['lamb-disk']!.path)).toEqual(checkpointFiles(saved['lamb-none']!.path));
    // Different states give different files (so the equality above could fail).
    expect(checkpointFiles(saved['lamb-none']!.path)).not.toEqual(reference);
    for (const report of reports) {
      const { saved: rankSaved, chunkBytes } = report;
      for (const [name, none] of [
        ['adamw-disk', 'adamw-none'],
        ['adamw-memory', 'adamw-none'],
        ['adamw-parameters-state', 'adamw-none'],
        ['lamb-disk', 'lamb-none'],
      ] as const) {
        const { streamed } = rankSaved[name]!;
        const stateBytes = rankSaved[none]!.stateBytes;
        // Every byte of the offloaded state was streamed, the writer never held more than a
        // chunk of it at once, and the state is several chunks (so the bound is not the state).
        expect(streamed.bytes, name).toBe(stateBytes);
        expect(streamed.largestRunBytes, name).toBeGreaterThan(0);
        expect(streamed.largestRunBytes, name).toBeLessThanOrEqual(chunkBytes);
        expect(stateBytes).toBeGreaterThan(2 * chunkBytes);
      }
      // Without offload nothing is streamed: the writer writes the optimizer's own arrays.
      expect(rankSaved['adamw-none']!.streamed).toEqual({ bytes: 0, largestRunBytes: 0 });
      expect(rankSaved['adamw-parameters']!.streamed).toEqual({ bytes: 0, largestRunBytes: 0 });
    }
  });

  it('fails the step on every rank naming the flipped file, with the model unchanged', () => {
    for (const report of reports) {
      const { error, flipped, modelUnchanged } = report.corruption;
      expect(error?.name, JSON.stringify(error)).toBe('FsdpError');
      expect(error!.code).toBe('offload-failed');
      expect(error!.file).toMatch(/optimizer-state-[01]\.bin$/);
      expect(error!.file!.startsWith(`${flipped}/`)).toBe(true);
      expect(error!.message).toContain(error!.file!);
      expect(error!.message).toMatch(/chunk 0 .*CRC-32/);
      expect(modelUnchanged).toBe(true);
    }
  });

  it('fails the backward on every rank naming a flipped parameter file; the stored shards stay as they were', () => {
    for (const report of reports) {
      const { error, flipped, modelUnchanged } = report.parameterCorruption;
      expect(error?.name, JSON.stringify(error)).toBe('FsdpError');
      expect(error!.message).toMatch(/parameters-[01]\.bin chunk 0 .*CRC-32/);
      expect(error!.message).toContain(`${flipped}/parameters-`);
      expect(modelUnchanged).toBe(true);
    }
  });

  it('resumes from a checkpoint into an offloaded model as the uninterrupted run', () => {
    for (const report of reports) {
      const { uninterrupted, resumed, resumedParameters } = report.resume;
      expect(resumed.losses).toEqual(uninterrupted.losses.slice(5));
      expect(resumed.pieces).toEqual(uninterrupted.pieces);
      expect(resumedParameters).toEqual(resumed);
      // And the uninterrupted offloaded run is the run without offload.
      expect(uninterrupted).toEqual(report.runs['adamw-disk']);
    }
  });
});

import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  commitStepDirectory,
  findLatestCheckpoint,
  listCheckpoints,
  pruneCheckpoints,
  writeLatestPointer,
} from '../src/format/checkpoint-directory';
import { encodeHeader, readHeader } from '../src/safetensors/safetensors-header';

const roots: string[] = [];
function freshRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'fsdp-checkpoint-dir-'));
  roots.push(root);
  return root;
}
function completeStep(root: string, step: number): string {
  const path = join(root, `step-${String(step).padStart(8, '0')}`);
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'metadata.json'), JSON.stringify({ step }));
  return path;
}

afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

describe('checkpoint directories after crashes', () => {
  it('ignores what a save that crashed left behind and falls back to the newest complete step', () => {
    const root = freshRoot();
    completeStep(root, 5);
    writeLatestPointer(root, 5);
    // Crash while writing step 10: a temporary directory with a partial shard, no metadata.
    mkdirSync(join(root, '.tmp-step-00000010-77'));
    writeFileSync(join(root, '.tmp-step-00000010-77', 'shard-00000-of-00002.bin'), Buffer.alloc(10));
    expect(findLatestCheckpoint(root)).toBe(join(root, 'step-00000005'));
    // Crash after the rename but before `latest` moved: latest still names step 5, which is complete.
    completeStep(root, 10);
    expect(findLatestCheckpoint(root)).toBe(join(root, 'step-00000005'));
    writeLatestPointer(root, 10);
    expect(readFileSync(join(root, 'latest'), 'utf8')).toBe('step-00000010\n');
    expect(findLatestCheckpoint(root)).toBe(join(root, 'step-00000010'));
    // latest naming a step that does not exist: the newest complete one, and a log line says so.
    writeFileSync(join(root, 'latest'), 'step-00000099\n');
    const lines: string[] = [];
    expect(findLatestCheckpoint(root, (line) => lines.push(line))).toBe(join(root, 'step-00000010'));
    expect(lines).toEqual([
      expect.stringMatching(/names 'step-00000099'.*directory is missing.*step-00000010/),
    ]);
  });

  it('resumes from the aside copy when a re-save of the same step crashed between its two renames', () => {
    const root = freshRoot();
    completeStep(root, 5);
    completeStep(root, 10);
    writeLatestPointer(root, 10);
    // commitStepDirectory moved step 10 aside, then the process died before renaming the new one in.
    renameSync(join(root, 'step-00000010'), join(root, '.old-step-00000010-42'));
    mkdirSync(join(root, '.tmp-step-00000010-42'));
    const lines: string[] = [];
    expect(findLatestCheckpoint(root, (line) => lines.push(line))).toBe(join(root, '.old-step-00000010-42'));
    expect(lines).toEqual([expect.stringMatching(/names 'step-00000010'.*missing.*\.old-step-00000010-42/)]);
    // Once step 10 exists again, the aside copy is ignored (and the next prune removes it).
    completeStep(root, 10);
    expect(findLatestCheckpoint(root)).toBe(join(root, 'step-00000010'));
    pruneCheckpoints(root, undefined, join(root, 'step-00000010'));
    expect(existsSync(join(root, '.old-step-00000010-42'))).toBe(false);
  });

  it('resumes from the newest intact step, saying so, when latest names a damaged one', () => {
    const root = freshRoot();
    completeStep(root, 15);
    const damaged = completeStep(root, 20);
    writeLatestPointer(root, 20);
    rmSync(join(damaged, 'metadata.json'));
    const lines: string[] = [];
    const log = (line: string) => lines.push(line);
    expect(findLatestCheckpoint(root, log)).toBe(join(root, 'step-00000015'));
    expect(lines[0]).toMatch(
      /latest names 'step-00000020', which is damaged \(metadata\.json is missing\); resuming from step-00000015/,
    );
    // metadata.json that fails its own digest counts as damaged too.
    writeFileSync(
      join(damaged, 'metadata.json'),
      `{\n "metadataSha256": "${'0'.repeat(64)}",\n "step": 20\n}\n`,
    );
    expect(findLatestCheckpoint(root, log)).toBe(join(root, 'step-00000015'));
    expect(lines[1]).toMatch(/metadata\.json fails its SHA-256 check/);
    // Not a step name at all.
    writeFileSync(join(root, 'latest'), 'ste\u0070-0000x020\n');
    expect(findLatestCheckpoint(root, log)).toBe(join(root, 'step-00000015'));
    expect(lines[2]).toMatch(/not a step directory name/);
    // Nothing intact left: an error, never null (null would mean "start over").
    rmSync(join(root, 'step-00000015'), { recursive: true });
    expect(() => findLatestCheckpoint(root, log)).toThrow(/holds no other intact checkpoint/);
  });

  it('prunes to `keep`, removes leftovers, and replaces a re-saved step', () => {
    const root = freshRoot();
    for (const step of [5, 10, 15]) completeStep(root, step);
    mkdirSync(join(root, '.tmp-step-00000020-3'));
    const temporary = join(root, '.tmp-step-00000015-9');
    mkdirSync(temporary);
    writeFileSync(join(temporary, 'metadata.json'), JSON.stringify({ step: 15, again: true }));
    const path = commitStepDirectory(root, temporary, 15, 9);
    expect(JSON.parse(readFileSync(join(path, 'metadata.json'), 'utf8'))).toEqual({ step: 15, again: true });
    pruneCheckpoints(root, 2, path);
    expect(listCheckpoints(root).map((entry) => entry.step)).toEqual([10, 15]);
    expect(existsSync(join(root, '.tmp-step-00000020-3'))).toBe(false);
    expect(findLatestCheckpoint(freshRoot())).toBeNull();
  });
});

describe('safetensors header', () => {
  it('pads the JSON to 8 bytes and reads back names, shapes and offsets', () => {
    const root = freshRoot();
    const { bytes, dataBytes } = encodeHeader(
      [
        { name: 'a.weight', shape: [2, 3] },
        { name: 'b', shape: [] },
      ],
      { format: 'pt' },
    );
    expect(bytes.length % 8).toBe(0);
    expect(dataBytes).toBe(28);
    const path = join(root, 'x.safetensors');
    writeFileSync(path, Buffer.concat([bytes, Buffer.alloc(dataBytes)]));
    const header = readHeader(path);
    expect(header.tensors.get('a.weight')).toEqual({ dtype: 'F32', shape: [2, 3], data_offsets: [0, 24] });
    expect(header.tensors.get('b')).toEqual({ dtype: 'F32', shape: [], data_offsets: [24, 28] });
    expect(header.metadata).toEqual({ format: 'pt' });
    writeFileSync(path, Buffer.concat([bytes, Buffer.alloc(dataBytes - 4)]));
    expect(() => readHeader(path)).toThrow(/invalid or unsupported entry for b/);
  });
});

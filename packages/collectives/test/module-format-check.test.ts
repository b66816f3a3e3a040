import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/errors';
import { checkTopLevelAwaitFormat } from '../src/launcher/worker-command.js';

// [Note: CommonJS apps and top-level await]: the launcher's check, with the workspace's tsx and
// its esbuild. The registry test (packages/fsdp-ts/test/installed-app.int.test.ts) runs the same
// through the installed fsdp-run in an `npm init -y` app.

const tsx = import.meta.resolve('tsx');
const directory = mkdtempSync(join(tmpdir(), 'fsdp-ts-module-format-'));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

function app(name: string, manifest: object | undefined, files: Record<string, string>): string {
  const path = mkdtempSync(join(directory, `${name}-`));
  if (manifest !== undefined) writeFileSync(join(path, 'package.json'), JSON.stringify(manifest));
  for (const [file, text] of Object.entries(files)) writeFileSync(join(path, file), text);
  return path;
}

const topLevelAwait = 'const value: number = await Promise.resolve(1);\nconsole.log(value);\n';

describe('checkTopLevelAwaitFormat', () => {
  it('stops a .ts script with top-level await in a "type": "commonjs" app with the one-line fix', () => {
    const path = app('commonjs', { name: 'a', type: 'commonjs' }, { 'train.ts': topLevelAwait });
    let thrown: unknown;
    try {
      checkTopLevelAwaitFormat(join(path, 'train.ts'), tsx);
    } catch (error) {
      thrown = error;
    }
    expect(CollectiveError.isInstance(thrown)).toBe(true);
    const message = (thrown as CollectiveError).message;
    expect(message).toContain('"type": "commonjs"');
    expect(message).toContain('npm pkg set type=module');
    expect(message).toContain('train.mts');
    expect(message.split('\n')).toHaveLength(1);
    expect((thrown as CollectiveError).code).toBe('launch');
  });

  it('says so for an app whose package.json has no "type"', () => {
    const path = app('typeless', { name: 'a' }, { 'train.ts': topLevelAwait });
    expect(() => checkTopLevelAwaitFormat(join(path, 'train.ts'), tsx)).toThrow(/no "type" field/);
  });

  it('lets through ES modules, .mts files and CommonJS scripts without top-level await', () => {
    const module = app('module', { name: 'a', type: 'module' }, { 'train.ts': topLevelAwait });
    expect(() => checkTopLevelAwaitFormat(join(module, 'train.ts'), tsx)).not.toThrow();
    const commonjs = app(
      'plain',
      { name: 'a', type: 'commonjs' },
      { 'train.mts': topLevelAwait, 'plain.ts': 'console.log(__dirname);\n', 'broken.ts': 'const = ;\n' },
    );
    expect(() => checkTopLevelAwaitFormat(join(commonjs, 'train.mts'), tsx)).not.toThrow();
    expect(() => checkTopLevelAwaitFormat(join(commonjs, 'plain.ts'), tsx)).not.toThrow();
    // Other compile errors are tsx's to report, with its own message.
    expect(() => checkTopLevelAwaitFormat(join(commonjs, 'broken.ts'), tsx)).not.toThrow();
  });
});

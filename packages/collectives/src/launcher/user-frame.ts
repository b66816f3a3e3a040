import { readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

/** `at fn (file:line:column)` or `at file:line:column`; the file may be a file:// URL. */
const FRAME = /^\s*at (?:.*? \()?(.+?):(\d+):(\d+)\)?\s*$/;

/** The fsdp-ts packages (not the examples): their src/ and dist/ files are library frames. */
const LIBRARY_PACKAGE = /^(fsdp-ts|@fsdp-ts\/(?!example-).+)$/;

/**
 * The top frame of `stack` in the user's code, as `file:line:column`: the first frame that is not
 * Node's own (`node:`), not a dependency (`node_modules`) and not in the src/ or dist/ of an
 * fsdp-ts package (a test fixture of this repository is user code). Undefined when none is.
 */
export function topUserFrame(stack: string | undefined): string | undefined {
  if (stack === undefined) return undefined;
  const packages = new Map<string, string | undefined>();
  for (const line of stack.split('\n')) {
    const match = FRAME.exec(line);
    if (match === null) continue;
    const file = match[1]!.startsWith('file://') ? safeFilePath(match[1]!) : match[1]!;
    if (file === undefined || !file.startsWith('/') || file.includes(`${sep}node_modules${sep}`)) continue;
    if (isLibraryFile(file, packages)) continue;
    return `${file}:${match[2]}:${match[3]}`;
  }
  return undefined;
}

function safeFilePath(url: string): string | undefined {
  try {
    return fileURLToPath(url);
  } catch {
    return undefined;
  }
}

function isLibraryFile(file: string, packages: Map<string, string | undefined>): boolean {
  const root = packageRootOf(dirname(file), packages);
  if (root === undefined) return false;
  const name = packages.get(root);
  if (name === undefined || !LIBRARY_PACKAGE.test(name)) return false;
  const inside = relative(root, file);
  return inside.startsWith(`src${sep}`) || inside.startsWith(`dist${sep}`);
}

/** The nearest directory at or above `directory` with a package.json; its name goes into `names`. */
function packageRootOf(directory: string, names: Map<string, string | undefined>): string | undefined {
  for (let current = directory; ; current = dirname(current)) {
    if (names.has(current)) return current;
    try {
      const { name } = JSON.parse(readFileSync(join(current, 'package.json'), 'utf8')) as { name?: unknown };
      names.set(current, typeof name === 'string' ? name : undefined);
      return current;
    } catch {
      // No (readable) package.json here: look further up.
    }
    if (dirname(current) === current) return undefined;
  }
}

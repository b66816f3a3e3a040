import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/** Bytes of every file under `path` (apparent sizes; symbolic links counted, not followed). */
export function directorySize(path: string): number {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return stat.size;
  let total = 0;
  for (const entry of readdirSync(path)) total += directorySize(join(path, entry));
  return total;
}

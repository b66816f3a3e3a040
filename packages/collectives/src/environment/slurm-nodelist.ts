import { CollectiveError } from '../errors.js';

/**
 * Expands a Slurm compressed host list (`SLURM_JOB_NODELIST`), e.g. `node[01-04,07],gpu5` into
 * node01, node02, node03, node04, node07, gpu5. Several bracket groups in one name expand as a
 * product (`r[1-2]n[1-2]` gives r1n1, r1n2, r2n1, r2n2); zero padding follows the lower bound.
 * Throws a CollectiveError (code 'invalid-argument') naming the list when it is malformed.
 */
export function expandSlurmNodelist(nodelist: string): string[] {
  const hosts: string[] = [];
  for (const item of splitTopLevel(nodelist)) {
    let names = [''];
    const pattern = /([^[\]]*)(?:\[([^[\]]*)\])?/y;
    let offset = 0;
    while (offset < item.length) {
      pattern.lastIndex = offset;
      const match = pattern.exec(item);
      if (match === null || match[0].length === 0)
        throw malformed(nodelist, `unbalanced brackets in '${item}'`);
      const text = match[1] ?? '';
      const ranges = match[2] === undefined ? [''] : expandRanges(match[2], nodelist);
      names = names.flatMap((name) => ranges.map((suffix) => name + text + suffix));
      offset += match[0].length;
    }
    hosts.push(...names);
  }
  if (hosts.length === 0 || hosts.some((host) => host === '')) throw malformed(nodelist, 'empty host name');
  return hosts;
}

function splitTopLevel(nodelist: string): string[] {
  const items: string[] = [];
  let depth = 0;
  let start = 0;
  for (let index = 0; index < nodelist.length; index++) {
    const character = nodelist[index];
    if (character === '[') depth++;
    else if (character === ']') depth--;
    if (depth < 0 || depth > 1) throw malformed(nodelist, 'unbalanced brackets');
    if (character === ',' && depth === 0) {
      items.push(nodelist.slice(start, index));
      start = index + 1;
    }
  }
  if (depth !== 0) throw malformed(nodelist, 'unbalanced brackets');
  items.push(nodelist.slice(start));
  return items.map((item) => item.trim());
}

function expandRanges(body: string, nodelist: string): string[] {
  const values: string[] = [];
  for (const part of body.split(',')) {
    const match = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (match === null) throw malformed(nodelist, `'${part}' is not a number or a range like 01-04`);
    const low = match[1]!;
    const high = match[2] ?? low;
    const first = Number(low);
    const last = Number(high);
    if (last < first || last - first > 100_000) throw malformed(nodelist, `range '${part}' is empty or huge`);
    for (let value = first; value <= last; value++) values.push(String(value).padStart(low.length, '0'));
  }
  return values;
}

function malformed(nodelist: string, reason: string): CollectiveError {
  return new CollectiveError(`Cannot parse the Slurm host list '${nodelist}': ${reason}.`, {
    code: 'invalid-argument',
    expected: "a list like 'node[01-04,07],gpu5'",
    actual: nodelist,
    fix: 'set MASTER_ADDR explicitly to the first host of the job.',
  });
}

import { FsdpError } from '../errors';

export interface NameCheck {
  /** Names the model needs and the dict lacks. */
  missing: string[];
  /** Names in the dict the model does not have. */
  unexpected: string[];
  /** Names whose shapes differ. */
  shapes: { name: string; expected: readonly number[]; actual: readonly number[] }[];
}

/**
 * Compares the dict's names and shapes with the model's; throws one FsdpError
 * ('state-dict-mismatch') naming every offender.
 */
export function checkNames(
  what: string,
  expected: ReadonlyMap<string, readonly number[]>,
  aliases: ReadonlyMap<string, readonly number[]>,
  actual: ReadonlyMap<string, readonly number[]>,
): void {
  const problems: NameCheck = { missing: [], unexpected: [], shapes: [] };
  for (const name of expected.keys()) if (!actual.has(name)) problems.missing.push(name);
  for (const [name, shape] of actual) {
    const wanted = expected.get(name) ?? aliases.get(name);
    if (wanted === undefined) problems.unexpected.push(name);
    else if (wanted.length !== shape.length || wanted.some((size, index) => size !== shape[index]))
      problems.shapes.push({ name, expected: wanted, actual: shape });
  }
  if (problems.missing.length + problems.unexpected.length + problems.shapes.length === 0) return;
  const parts = [
    problems.missing.length > 0 ? `missing ${problems.missing.join(', ')}` : '',
    problems.unexpected.length > 0 ? `unexpected ${problems.unexpected.join(', ')}` : '',
    ...problems.shapes.map(
      (shape) =>
        `${shape.name} has shape [${shape.actual.join(', ')}], expected [${shape.expected.join(', ')}]`,
    ),
  ].filter((part) => part !== '');
  throw new FsdpError(`${what}: the dict does not match the model: ${parts.join('; ')}.`, {
    code: 'state-dict-mismatch',
    expected: [...expected.keys()],
    actual: problems,
    fix: 'load a dict saved from the same model (same names and shapes); nothing was loaded.',
  });
}

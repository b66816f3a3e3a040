/** Finds every { min, median, max } in a benchmark's JSON and prints it as one table row. */
interface Spread {
  min: number;
  median: number;
  max: number;
}

function isSpread(value: unknown): value is Spread {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Spread).min === 'number' &&
    typeof (value as Spread).median === 'number' &&
    typeof (value as Spread).max === 'number'
  );
}

/** A row's label: the nearest descriptive string fields (name, measure, case, …) plus the key path. */
function label(path: string[], context: Record<string, unknown>[]): string {
  const names: string[] = [];
  for (const object of context) {
    for (const key of [
      'benchmark',
      'name',
      'measure',
      'case',
      'kind',
      'op',
      'backend',
      'size',
      'bytes',
      'unit',
    ]) {
      const value = object[key];
      if ((typeof value === 'string' || typeof value === 'number') && !names.includes(String(value)))
        names.push(`${value}`);
    }
  }
  const tail = path.filter((part) => !/^\d+$/.test(part)).slice(-2);
  return [...names, ...tail].join(' · ');
}

function format(value: number): string {
  if (value === 0 || !Number.isFinite(value)) return String(value);
  const magnitude = Math.abs(value);
  if (magnitude >= 1e9) return `${(value / 1e9).toFixed(2)}e9`;
  if (magnitude >= 1e6) return `${(value / 1e6).toFixed(2)}e6`;
  return magnitude >= 100 ? value.toFixed(0) : value.toPrecision(3);
}

export function summariseFigures(content: unknown, limit = 40): string[] {
  const rows: string[] = [];
  const visit = (value: unknown, path: string[], context: Record<string, unknown>[]) => {
    if (rows.length >= limit) return;
    if (isSpread(value)) {
      rows.push(
        `| ${label(path, context)} | ${format(value.median)} | ${format(value.min)} | ${format(value.max)} |`,
      );
      return;
    }
    if (Array.isArray(value)) {
      value.forEach((entry, index) => {
        visit(entry, [...path, String(index)], context);
      });
      return;
    }
    if (typeof value === 'object' && value !== null) {
      const object = value as Record<string, unknown>;
      for (const [key, entry] of Object.entries(object))
        visit(entry, [...path, key], [...context, object].slice(-2));
    }
  };
  visit(content, [], []);
  if (rows.length === 0) return ['(no min/median/max figures in this file)'];
  return [
    '| figure | median | min | max |',
    '| --- | --- | --- | --- |',
    ...rows,
    ...(rows.length >= limit ? [`(first ${limit} figures; the JSON has them all)`] : []),
  ];
}

/** The scale benchmark's plot: peak memory per rank against parameters (both axes logarithmic). */

export interface PlotPoint {
  parameters: number;
  strategy: string;
  worldSize: number;
  capped: boolean;
  /** Undefined when the run was skipped or failed. */
  measuredBytes: number | undefined;
  predictedBytes: number;
}

const WIDTH = 720;
const HEIGHT = 440;
const MARGIN = { left: 70, right: 190, top: 30, bottom: 50 };
const COLORS: Record<string, string> = {
  'single W=1': '#555555',
  'no-shard W=2': '#d62728',
  'no-shard W=4': '#ff9896',
  'full-shard W=1': '#1f77b4',
  'full-shard W=2': '#2ca02c',
  'full-shard W=4': '#9467bd',
};

/**
 * One point per series and model size: a measured one where there is one (a cap does not change
 * what a rank uses unless it stops the run), else the prediction alone.
 */
function onePerSeries(points: readonly PlotPoint[]): PlotPoint[] {
  const chosen = new Map<string, PlotPoint>();
  for (const point of points) {
    const key = `${point.strategy} W=${point.worldSize} ${point.parameters}`;
    const previous = chosen.get(key);
    if (previous === undefined || (previous.measuredBytes === undefined && point.measuredBytes !== undefined))
      chosen.set(key, point);
  }
  return [...chosen.values()];
}

/** `capBytes`: a horizontal line marking the per-rank cap of the headline (e.g. 2 GiB). */
export function memoryPlot(points: readonly PlotPoint[], capBytes?: number): string {
  const uncapped = onePerSeries(points);
  const xs = uncapped.map((point) => point.parameters);
  const ys = [
    ...uncapped.flatMap((point) => [point.predictedBytes, point.measuredBytes ?? point.predictedBytes]),
    ...(capBytes === undefined ? [] : [capBytes]),
  ];
  const xMin = Math.log10(Math.min(...xs) / 1.5);
  const xMax = Math.log10(Math.max(...xs) * 1.5);
  const yMin = Math.log10(Math.min(...ys) / 1.5);
  const yMax = Math.log10(Math.max(...ys) * 1.5);
  const x = (value: number) =>
    MARGIN.left + ((Math.log10(value) - xMin) / (xMax - xMin)) * (WIDTH - MARGIN.left - MARGIN.right);
  const y = (value: number) =>
    HEIGHT -
    MARGIN.bottom -
    ((Math.log10(value) - yMin) / (yMax - yMin)) * (HEIGHT - MARGIN.top - MARGIN.bottom);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${MARGIN.left}" y="18" font-size="14">Peak memory per rank (GiB) against parameters: dashed lines predicted, dots measured</text>`,
  ];
  for (let exponent = Math.ceil(yMin); exponent <= Math.floor(yMax); exponent++) {
    const value = 10 ** exponent;
    parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(value)}" y2="${y(value)}" stroke="#eeeeee"/>`,
    );
    parts.push(
      `<text x="${MARGIN.left - 6}" y="${y(value) + 4}" text-anchor="end">${(value / 1024 ** 3).toPrecision(2)}</text>`,
    );
  }
  for (let exponent = Math.ceil(xMin); exponent <= Math.floor(xMax); exponent++) {
    const value = 10 ** exponent;
    parts.push(
      `<text x="${x(value)}" y="${HEIGHT - MARGIN.bottom + 18}" text-anchor="middle">${value >= 1e9 ? `${value / 1e9} B` : `${value / 1e6} M`}</text>`,
    );
  }
  parts.push(
    `<text x="${(MARGIN.left + WIDTH - MARGIN.right) / 2}" y="${HEIGHT - 10}" text-anchor="middle">parameters</text>`,
  );
  if (capBytes !== undefined) {
    parts.push(
      `<line x1="${MARGIN.left}" x2="${WIDTH - MARGIN.right}" y1="${y(capBytes)}" y2="${y(capBytes)}" stroke="#000000" stroke-dasharray="2,4"/>`,
    );
    parts.push(
      `<text x="${WIDTH - MARGIN.right - 4}" y="${y(capBytes) - 5}" text-anchor="end">cap ${(capBytes / 1024 ** 3).toFixed(0)} GiB per rank</text>`,
    );
  }
  let legendRow = 0;
  for (const [series, color] of Object.entries(COLORS)) {
    const members = uncapped
      .filter((point) => `${point.strategy} W=${point.worldSize}` === series)
      .sort((a, b) => a.parameters - b.parameters);
    if (members.length === 0) continue;
    const path = members
      .map(
        (point, index) =>
          `${index === 0 ? 'M' : 'L'}${x(point.parameters).toFixed(1)},${y(point.predictedBytes).toFixed(1)}`,
      )
      .join(' ');
    parts.push(`<path d="${path}" fill="none" stroke="${color}" stroke-width="2" stroke-dasharray="5,3"/>`);
    for (const point of members) {
      if (point.measuredBytes === undefined) continue;
      parts.push(
        `<circle cx="${x(point.parameters).toFixed(1)}" cy="${y(point.measuredBytes).toFixed(1)}" r="4" fill="${color}"/>`,
      );
    }
    const legendY = MARGIN.top + 20 + legendRow++ * 18;
    parts.push(
      `<line x1="${WIDTH - MARGIN.right + 15}" x2="${WIDTH - MARGIN.right + 40}" y1="${legendY - 4}" y2="${legendY - 4}" stroke="${color}" stroke-width="2"/>`,
    );
    parts.push(`<text x="${WIDTH - MARGIN.right + 46}" y="${legendY}">${series}</text>`);
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

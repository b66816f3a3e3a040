/** A series of (x, y) points drawn as one polyline. */
export interface Series {
  readonly points: readonly (readonly [number, number])[];
  readonly color: string;
  readonly label: string;
  readonly width?: number;
  readonly opacity?: number;
}

export interface PanelOptions {
  readonly title: string;
  readonly xLabel: string;
  readonly series: readonly Series[];
  readonly yMin?: number;
  readonly yMax?: number;
}

const PANEL_WIDTH = 420;
const PANEL_HEIGHT = 280;
const MARGIN = { left: 52, right: 16, top: 34, bottom: 42 };

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function niceTicks(min: number, max: number, count: number): number[] {
  const span = max - min || 1;
  const rough = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step =
    [1, 2, 5, 10].map((factor) => factor * magnitude).find((candidate) => candidate >= rough) ?? rough;
  const ticks: number[] = [];
  for (let tick = Math.ceil(min / step) * step; tick <= max + step * 1e-9; tick += step)
    ticks.push(Number(tick.toPrecision(6)));
  return ticks;
}

/** One panel: axes, ticks, grid, the series and a legend; `offsetX` places it in a row of panels. */
function panel(options: PanelOptions, offsetX: number): string {
  const all = options.series.flatMap((series) => series.points);
  const xs = all.map(([x]) => x);
  const ys = all.map(([, y]) => y);
  const xMin = Math.min(...xs, 0);
  const xMax = Math.max(...xs, 1);
  const yMin = options.yMin ?? Math.min(...ys);
  const yMax = options.yMax ?? Math.max(...ys);
  const plotWidth = PANEL_WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom;
  const sx = (x: number) => offsetX + MARGIN.left + ((x - xMin) / (xMax - xMin || 1)) * plotWidth;
  const sy = (y: number) => MARGIN.top + plotHeight - ((y - yMin) / (yMax - yMin || 1)) * plotHeight;
  const parts: string[] = [];
  parts.push(
    `<text x="${offsetX + PANEL_WIDTH / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">${escapeXml(options.title)}</text>`,
  );
  for (const tick of niceTicks(yMin, yMax, 5)) {
    parts.push(
      `<line x1="${sx(xMin)}" x2="${sx(xMax)}" y1="${sy(tick)}" y2="${sy(tick)}" stroke="#e5e5e5"/>`,
    );
    parts.push(
      `<text x="${sx(xMin) - 6}" y="${sy(tick) + 4}" text-anchor="end" font-size="11">${tick}</text>`,
    );
  }
  for (const tick of niceTicks(xMin, xMax, 5)) {
    parts.push(
      `<text x="${sx(tick)}" y="${MARGIN.top + plotHeight + 16}" text-anchor="middle" font-size="11">${tick}</text>`,
    );
  }
  parts.push(
    `<rect x="${sx(xMin)}" y="${MARGIN.top}" width="${plotWidth}" height="${plotHeight}" fill="none" stroke="#999"/>`,
    `<text x="${offsetX + MARGIN.left + plotWidth / 2}" y="${PANEL_HEIGHT - 8}" text-anchor="middle" font-size="12">${escapeXml(options.xLabel)}</text>`,
  );
  options.series.forEach((series, index) => {
    if (series.points.length === 0) return;
    const path = series.points
      .map(([x, y]) => `${sx(x).toFixed(1)},${sy(Math.min(yMax, Math.max(yMin, y))).toFixed(1)}`)
      .join(' ');
    parts.push(
      `<polyline points="${path}" fill="none" stroke="${series.color}" stroke-width="${series.width ?? 2}" opacity="${series.opacity ?? 1}"/>`,
    );
    if (series.points.length === 1 || series.width === undefined) {
      for (const [x, y] of series.points)
        parts.push(
          `<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="2.5" fill="${series.color}"/>`,
        );
    }
    const legendY = MARGIN.top + 14 + index * 15;
    parts.push(
      `<line x1="${sx(xMax) - 120}" x2="${sx(xMax) - 104}" y1="${legendY - 4}" y2="${legendY - 4}" stroke="${series.color}" stroke-width="2"/>`,
      `<text x="${sx(xMax) - 100}" y="${legendY}" font-size="11">${escapeXml(series.label)}</text>`,
    );
  });
  return parts.join('\n');
}

/** Panels side by side in one standalone SVG document. */
export function renderPanels(panels: readonly PanelOptions[], caption: string): string {
  const width = PANEL_WIDTH * panels.length;
  const height = PANEL_HEIGHT + 22;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    ...panels.map((options, index) => panel(options, index * PANEL_WIDTH)),
    `<text x="${width / 2}" y="${height - 6}" text-anchor="middle" font-size="11" fill="#555">${escapeXml(caption)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}

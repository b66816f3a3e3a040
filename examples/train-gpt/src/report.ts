import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { RunSummary } from './metrics';
import { renderPanels } from './plot-svg';

function exponentialAverage(values: readonly number[], weight: number): number[] {
  let average = values[0] ?? 0;
  return values.map((value) => {
    average = weight * average + (1 - weight) * value;
    return average;
  });
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** The loss and metric curves of a run as SVG. */
export function renderCurves(summary: RunSummary): string {
  const losses = summary.steps.map((record) => record.loss);
  const smoothed = exponentialAverage(losses, 0.9);
  return renderPanels(
    [
      {
        title: 'training loss',
        xLabel: 'step',
        yMin: 0,
        series: [
          {
            points: summary.steps.map((record, index) => [record.step, losses[index]!]),
            color: '#9ecae1',
            label: 'per step',
            width: 1,
          },
          {
            points: summary.steps.map((record, index) => [record.step, smoothed[index]!]),
            color: '#08519c',
            label: 'smoothed',
            width: 2,
          },
        ],
      },
      {
        title: summary.metricName,
        xLabel: 'step',
        yMin: 0,
        yMax: 1,
        series: [
          {
            points: summary.evaluations.map((record) => [record.step, record.metric]),
            color: '#d94801',
            label: 'held out',
          },
        ],
      },
    ],
    `${summary.task} · ${summary.parameters.toLocaleString('en-US')} parameters · FSDP ${summary.strategy} over ${summary.worldSize} processes · ${summary.backend}`,
  );
}

/** Writes curves.svg and report.html into `out`. */
export function writeReport(out: string, summary: RunSummary): void {
  writeFileSync(resolve(out, 'curves.svg'), renderCurves(summary));
  const first = summary.evaluations[0];
  const last = summary.evaluations.at(-1);
  const measured = summary.steps.slice(Math.min(5, summary.steps.length - 1));
  const rows = [
    ['task', summary.task],
    [
      'model',
      `GPT, dModel ${summary.config.dModel}, ${summary.config.layers} layers, ${summary.config.heads} heads, seqLen ${summary.config.seqLen}, vocab ${summary.config.vocabSize} (${summary.parameters.toLocaleString('en-US')} parameters)`,
    ],
    [
      'parallelism',
      `FSDP ${summary.strategy} (flattened: ${summary.flattenParameters}), ${summary.worldSize} processes, batch ${summary.config.batchPerRank} per rank, ${summary.backend} backend`,
    ],
    [
      'steps',
      `${summary.steps.length} in ${summary.wallSeconds.toFixed(1)} s (with evaluation and start-up)`,
    ],
    ['loss', `${summary.steps[0]?.loss.toFixed(3)} → ${summary.steps.at(-1)?.loss.toFixed(3)}`],
    [
      summary.metricName,
      `${((first?.metric ?? 0) * 100).toFixed(1)}% → ${((last?.metric ?? 0) * 100).toFixed(1)}% (${last?.correct}/${last?.total})`,
    ],
    ['tokens/s (median after step 5)', median(measured.map((record) => record.tokensPerSecond)).toFixed(0)],
    [
      'communication wait per step (median)',
      `${median(measured.map((record) => record.communicationWaitMs)).toFixed(1)} ms`,
    ],
  ];
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>train-gpt report</title>
<style>body{font-family:sans-serif;max-width:900px;margin:2em auto;color:#222}td{padding:2px 12px 2px 0;vertical-align:top}pre{background:#f6f6f6;padding:8px}</style>
</head><body>
<h1>train-gpt: FSDP training report</h1>
<p>Finished ${escapeHtml(summary.finishedAt)}.</p>
<table>${rows.map(([key, value]) => `<tr><td><b>${escapeHtml(key!)}</b></td><td>${escapeHtml(value ?? '')}</td></tr>`).join('')}</table>
<h2>Curves</h2>
<img src="curves.svg" alt="training loss and ${escapeHtml(summary.metricName)} per step">
<h2>Sample generations (greedy)</h2>
<pre>${summary.samples.map(escapeHtml).join('\n')}</pre>
<p>Raw numbers: <a href="metrics.json">metrics.json</a>.</p>
</body></html>
`;
  writeFileSync(resolve(out, 'report.html'), html);
}

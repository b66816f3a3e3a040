/** The seed's table (issue 10) from bench-results/fsdp-training.json: both settings, world size 2. */
interface Spread {
  min: number;
  median: number;
  max: number;
}

interface Row {
  kind: string;
  worldSize: number;
  tokensPerSecond: Spread;
  stepMs: Spread;
  cpuMs?: Spread;
  allGatherWaitMs: Spread;
  reductionWaitMs: Spread;
  peak: { parametersGradientsOptimizerBytes: number; tfBytes: number };
}

interface FsdpResults {
  date: string;
  note: string;
  throughput: Record<string, Record<string, Row>>;
  memory: {
    layers: number;
    kind: string;
    worldSize: number;
    measuredBytes: number;
    modelBytes: number;
    tfPeakBytes: number;
  }[];
  targets: { name: string; met: boolean; detail: string }[];
}

const seedRows: [string, string, string][] = [
  ['no-shard-unflat', 'data parallel (no-shard)', 'no (one all-reduce per parameter)'],
  ['no-shard', 'data parallel (no-shard)', 'yes (bucketed/flat)'],
  ['full-shard-unflat', 'FSDP full-shard', 'no'],
  ['full-shard-flat-optimizer', 'FSDP full-shard', 'yes (optimizer over the flat shards)'],
  [
    'full-shard-submodule-optimizer',
    'FSDP full-shard',
    'yes, original parameters used by a per-submodule optimizer (the default)',
  ],
];

const mebibytes = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

export function seedTable(results: FsdpResults): string[] {
  const lines = ['## The seed table, reproduced (world size 2, real processes, tcp on loopback, wasm)', ''];
  for (const [setting, rows] of Object.entries(results.throughput)) {
    const title =
      setting === 'compute'
        ? 'compute-bound: reference GPT (vocab 256, dModel 256, 4 layers, 4 heads), batch 8 × seqLen 128 per rank'
        : 'communication-bound: the same model, batch 1 × seqLen 16 per rank';
    lines.push(`### ${title}`, '');
    lines.push(
      '| wrapper | flatten params? | tokens/s median (min–max) | CPU ms/step | comm wait ms/step | peak params+grads+optim MiB | peak tfjs MiB |',
    );
    lines.push('| --- | --- | --- | --- | --- | --- | --- |');
    for (const [kind, wrapper, flatten] of seedRows) {
      const row = rows[kind];
      if (row === undefined) continue;
      const wait = row.allGatherWaitMs.median + row.reductionWaitMs.median;
      lines.push(
        `| ${wrapper} | ${flatten} | ${row.tokensPerSecond.median.toFixed(0)} (${row.tokensPerSecond.min.toFixed(0)}–${row.tokensPerSecond.max.toFixed(0)}) | ${row.cpuMs?.median.toFixed(0) ?? '–'} | ${wait.toFixed(0)} | ${mebibytes(row.peak.parametersGradientsOptimizerBytes)} | ${mebibytes(row.peak.tfBytes)} |`,
      );
    }
    const others = ['single', 'shard-grad-op', 'full-shard']
      .map((kind) => rows[kind])
      .filter((row): row is Row => row !== undefined)
      .map(
        (row) =>
          `${row.kind} ${row.tokensPerSecond.median.toFixed(0)} (${row.tokensPerSecond.min.toFixed(0)}–${row.tokensPerSecond.max.toFixed(0)})`,
      );
    if (others.length > 0) lines.push('', `Also: ${others.join('; ')} tokens/s.`);
    lines.push('');
  }
  if (results.memory.length > 0) {
    lines.push('### Memory per rank (parameters + gradients + optimizer state at the peak of a step)', '');
    lines.push(
      '| layers | strategy | W | measured MiB | model 16·P/N + 8·2·L MiB | peak tfjs MiB |',
      '| --- | --- | --- | --- | --- | --- |',
    );
    for (const row of results.memory) {
      lines.push(
        `| ${row.layers} | ${row.kind} | ${row.worldSize} | ${mebibytes(row.measuredBytes)} | ${mebibytes(row.modelBytes)} | ${mebibytes(row.tfPeakBytes)} |`,
      );
    }
    lines.push('');
  }
  lines.push(
    '### Targets',
    '',
    ...results.targets.map(
      (target) => `- ${target.met ? 'met' : '**not met**'}: ${target.name} (${target.detail})`,
    ),
    '',
    results.note,
  );
  return lines;
}

/** Timing helpers for the benchmark: repeated samples and their min/median/max. */
export interface Summary {
  min: number;
  median: number;
  max: number;
  samples: number[];
}

export function summarise(samples: number[]): Summary {
  const sorted = [...samples].sort((first, second) => first - second);
  const middle = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { min: sorted[0]!, median, max: sorted[sorted.length - 1]!, samples };
}

/** Milliseconds per call of `run`, after `warmup` calls. */
export function timeIt(run: () => void, repeats = 10, warmup = 2): Summary {
  for (let index = 0; index < warmup; index++) run();
  const samples: number[] = [];
  for (let index = 0; index < repeats; index++) {
    const start = performance.now();
    run();
    samples.push(performance.now() - start);
  }
  return summarise(samples);
}

/** Converts a time summary (ms) into a rate summary (work per second): min rate from max time. */
export function rate(time: Summary, workPerCall: number): Summary {
  const perSecond = (ms: number) => (workPerCall / ms) * 1000;
  return {
    min: perSecond(time.max),
    median: perSecond(time.median),
    max: perSecond(time.min),
    samples: time.samples.map(perSecond),
  };
}

export function formatRange(summary: Summary, digits = 2): string {
  return `${summary.median.toFixed(digits)} (${summary.min.toFixed(digits)}–${summary.max.toFixed(digits)})`;
}

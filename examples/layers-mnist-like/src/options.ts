import { parseArgs } from 'node:util';

export interface ExampleOptions {
  samples: number;
  validation: number;
  epochs: number;
  batchSize: number;
  learningRate: number;
  worldSize: number;
  /** Where rank 0 and the single-process run write their result JSON (optional). */
  out: string | undefined;
}

export function parseExampleOptions(argv: string[]): ExampleOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      samples: { type: 'string', default: '2048' },
      validation: { type: 'string', default: '512' },
      epochs: { type: 'string', default: '2' },
      'batch-size': { type: 'string', default: '64' },
      lr: { type: 'string', default: '0.003' },
      'world-size': { type: 'string', default: '2' },
      out: { type: 'string' },
    },
    strict: true,
  });
  const number = (name: string, text: string | undefined): number => {
    const value = Number(text);
    if (!Number.isFinite(value) || value <= 0)
      throw new Error(`--${name} must be a positive number; got ${text}.`);
    return value;
  };
  return {
    samples: number('samples', values.samples),
    validation: number('validation', values.validation),
    epochs: number('epochs', values.epochs),
    batchSize: number('batch-size', values['batch-size']),
    learningRate: number('lr', values.lr),
    worldSize: number('world-size', values['world-size']),
    out: values.out,
  };
}

import { type ParameterInitializer, TensorView } from '@fsdp-ts/tensor';
import { Generator, type GeneratorState } from './random/generator';

/**
 * normal(mean, std) values drawn from a generator starting at a recorded state: the values
 * `initNormal` writes when handed a generator in that state, any range bit for bit (see
 * [Note: initializer ranges]). Filling elements [start, end) replays the stream from the recorded
 * state past `start` normals (Generator.skipNormals), then draws end - start.
 */
export class NormalInitializer implements ParameterInitializer {
  readonly state: GeneratorState;
  readonly std: number;
  readonly mean: number;

  constructor(state: GeneratorState, std: number, mean = 0) {
    this.state = { words: [...state.words], spareNormal: state.spareNormal };
    this.std = std;
    this.mean = mean;
  }

  get description(): string {
    return `normal(${this.mean}, ${this.std})`;
  }

  /** Writes the initial values of `target` (which starts at element `start` of the parameter). */
  fill(target: TensorView, start: number): void {
    const generator = new Generator();
    generator.setState(this.state);
    generator.skipNormals(start);
    const { mean, std } = this;
    // Same arithmetic as initNormal (a double rounded to float32 on store), so the bits match.
    if (target.dtype === 'float32' && target.isContiguous) {
      const array = target.typedArray() as Float32Array;
      for (let index = 0; index < array.length; index++) array[index] = mean + std * generator.normal();
      return;
    }
    const values = new Float32Array(target.numel);
    for (let index = 0; index < values.length; index++) values[index] = mean + std * generator.normal();
    // Other dtypes or strided views: convert through copyFrom, as initNormal does.
    target.copyFrom(TensorView.fromArray(values, target.shape, 'float32'));
  }
}

/** Every element `value` (LayerNorm's weight 1, biases 0). */
export class ConstantInitializer implements ParameterInitializer {
  readonly value: number;

  constructor(value: number) {
    this.value = value;
  }

  get description(): string {
    return `constant(${this.value})`;
  }

  /** Writes the initial values of `target`. */
  fill(target: TensorView, _start: number): void {
    target.fill(this.value);
  }
}

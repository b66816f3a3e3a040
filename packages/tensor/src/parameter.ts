import type { DType } from './dtype/dtype';
import { formatShape, TensorError } from './errors';
import { foreignParameterMessage, PARAMETER_MARKER } from './package-copies';
import { type Shape, shapeNumel, shapesEqual } from './shape';
import type { StorageOptions } from './storage';
import { TensorView } from './tensor-view';

export interface ParameterOptions {
  name?: string;
  requiresGrad?: boolean;
}

let nextParameterId = 1;

/** Shared by every copy of this package (see `Parameter.isInstance`). */
const parameterMarker = Symbol.for('fsdp-ts.tensor.Parameter');

/**
 * The object users hold. Its identity never changes; what changes is where `data` and `grad`
 * point.
 *
 * [Note: parameter views]
 * `shape` is the original shape, for life. `data` is either
 *   - a view of exactly `shape` (own storage before wrapping; the unit's unsharded flat buffer
 *     while a unit is gathered), or
 *   - a 1-D view of the part of the parameter this rank owns in a sharded flat buffer, with
 *     between 0 and numel elements (sharded).
 * `grad` is null or follows the same rule (and, when both are set, has data's shape).
 * Re-pointing is O(1): the setters check shape and dtype, and never copy.
 */
export class Parameter {
  readonly id = nextParameterId++;
  name: string;
  readonly shape: Shape;
  readonly dtype: DType;
  readonly numel: number;
  requiresGrad: boolean;
  private dataView: TensorView;
  private gradView: TensorView | null = null;

  constructor(data: TensorView, options: ParameterOptions = {}) {
    this.name = options.name ?? '';
    this.shape = Object.freeze([...data.shape]);
    this.dtype = data.dtype;
    this.numel = shapeNumel(data.shape);
    this.requiresGrad = options.requiresGrad ?? true;
    this.dataView = data;
    Object.defineProperty(this, parameterMarker, { value: true });
  }

  /**
   * Whether `value` is a Parameter, from this or any other loaded copy of @fsdp-ts/tensor (a
   * `Symbol.for` marker, as the error classes use: [Note: errors across package copies]).
   */
  static isInstance(value: unknown): value is Parameter {
    return (
      typeof value === 'object' &&
      value !== null &&
      (value as Record<symbol, unknown>)[parameterMarker] === true
    );
  }

  /** A parameter over a new storage holding `values`. */
  static fromArray(
    values: ArrayLike<number>,
    shape: Shape,
    options: ParameterOptions & StorageOptions & { dtype?: DType } = {},
  ) {
    return new Parameter(
      TensorView.fromArray(values, shape, options.dtype ?? 'float32', storageOptions(options)),
      options,
    );
  }

  static zeros(shape: Shape, options: ParameterOptions & StorageOptions & { dtype?: DType } = {}): Parameter {
    return new Parameter(
      TensorView.zeros(shape, options.dtype ?? 'float32', storageOptions(options)),
      options,
    );
  }

  get data(): TensorView {
    return this.dataView;
  }

  set data(view: TensorView) {
    this.checkView(view, 'data');
    this.dataView = view;
  }

  get grad(): TensorView | null {
    return this.gradView;
  }

  set grad(view: TensorView | null) {
    if (view !== null) this.checkView(view, 'grad');
    this.gradView = view;
  }

  /** True when `data` has the original shape (not a sharded 1-D part). */
  get isFullShape(): boolean {
    return shapesEqual(this.dataView.shape, this.shape);
  }

  toString(): string {
    return `Parameter(${this.name || `#${this.id}`}: ${this.dtype}${formatShape(this.shape)})`;
  }

  private checkView(view: TensorView, field: 'data' | 'grad'): void {
    const fullShape = shapesEqual(view.shape, this.shape);
    const partial = view.rank === 1 && view.numel <= this.numel;
    if (!fullShape && !partial) {
      throw new TensorError(
        `${this}: cannot point ${field} at a view of shape ${formatShape(view.shape)}; expected shape ${formatShape(this.shape)} or a 1-D part of at most ${this.numel} elements.`,
        {
          code: 'shape-mismatch',
          expected: `shape ${formatShape(this.shape)}, or a 1-D part of at most ${this.numel} elements`,
          actual: view.shape,
          fix: 'point the parameter at a view of its original shape or at its 1-D shard part.',
        },
      );
    }
    if (view.dtype !== this.dtype && field === 'data') {
      throw new TensorError(`${this}: cannot point data at a ${view.dtype} view; expected ${this.dtype}.`, {
        code: 'dtype-mismatch',
        expected: this.dtype,
        actual: view.dtype,
        fix: 'convert with TensorView.copyFrom into a view of the parameter dtype.',
      });
    }
  }
}

function storageOptions(options: StorageOptions): StorageOptions {
  return options.shared === undefined ? {} : { shared: options.shared };
}

Object.defineProperty(Parameter.prototype, PARAMETER_MARKER, { value: true });

/**
 * Why `value` fails `instanceof Parameter` although it is one: it comes from another copy of
 * @fsdp-ts/tensor ([Note: duplicate package copies]). Undefined for anything else.
 */
export function explainForeignParameter(value: unknown): string | undefined {
  if (value instanceof Parameter || typeof value !== 'object' || value === null) return undefined;
  return PARAMETER_MARKER in value ? foreignParameterMessage() : undefined;
}

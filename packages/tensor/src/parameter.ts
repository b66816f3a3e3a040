import type { OptionKeys } from '@fsdp-ts/errors';
import type { DType } from './dtype/dtype';
import { formatShape, TensorError } from './errors';
import { checkTensorOptionKeys } from './internal/check-option-keys';
import { foreignParameterMessage, PARAMETER_MARKER } from './package-copies';
import type { ParameterInitializer } from './parameter-initializer';
import { type Shape, shapeNumel, shapesEqual } from './shape';
import { Storage, type StorageOptions, storageOptionKeys } from './storage';
import { TensorView } from './tensor-view';

/** Options of a Parameter: its name and whether it requires a gradient. */
export interface ParameterOptions {
  name?: string;
  requiresGrad?: boolean;
}

/** The keys of ParameterOptions ([Note: option keys] in @fsdp-ts/errors). */
const parameterOptionKeys = {
  name: true,
  requiresGrad: true,
} as const satisfies OptionKeys<ParameterOptions>;

/** The options of Parameter.fromArray, zeros and deferred. */
type CreateParameterOptions = ParameterOptions & StorageOptions & { dtype?: DType };

const createParameterOptionKeys = {
  ...parameterOptionKeys,
  ...storageOptionKeys,
  dtype: true,
} as const satisfies OptionKeys<CreateParameterOptions>;

const pytorchParameterNames = { requires_grad: "PyTorch's requires_grad is requiresGrad here" };

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
 *
 * [Note: deferred parameters]
 * A deferred Parameter (`Parameter.deferred`) knows its shape, dtype and how its values are made
 * (a ParameterInitializer) but holds no values: its `data` is a view of an unallocated storage,
 * and reading it throws. PyTorch's meta device plus `param_init_fn`, and FSDP2's
 * init-on-meta-then-materialise: whoever needs the values makes them, and only those it keeps:
 *   - `materialize()` allocates the full values (eager construction's result, bit for bit);
 *   - `copyValuesInto(target, start)` writes one range without allocating the rest (a rank
 *     flattening its shard of a unit fills only its part; see [Note: initializer ranges]).
 * A Parameter stops being deferred when it is materialised or when `data` is pointed elsewhere
 * (whoever re-points it has written the values there, as flattening does).
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
  private deferredInitializer: ParameterInitializer | null = null;

  constructor(data: TensorView, options: ParameterOptions = {}) {
    checkTensorOptionKeys('Parameter', options, parameterOptionKeys, pytorchParameterNames);
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
  static fromArray(values: ArrayLike<number>, shape: Shape, options: CreateParameterOptions = {}) {
    checkTensorOptionKeys('Parameter.fromArray', options, createParameterOptionKeys, pytorchParameterNames);
    return new Parameter(
      TensorView.fromArray(values, shape, options.dtype ?? 'float32', storageOptions(options)),
      parameterOptions(options),
    );
  }

  /** A new parameter of `shape` filled with zeros. */
  static zeros(shape: Shape, options: CreateParameterOptions = {}): Parameter {
    checkTensorOptionKeys('Parameter.zeros', options, createParameterOptionKeys, pytorchParameterNames);
    return new Parameter(
      TensorView.zeros(shape, options.dtype ?? 'float32', storageOptions(options)),
      parameterOptions(options),
    );
  }

  /**
   * A Parameter of `shape` whose values are not made yet: `initializer` makes them on
   * `materialize()` or range by range (see [Note: deferred parameters]).
   */
  static deferred(
    shape: Shape,
    initializer: ParameterInitializer,
    options: CreateParameterOptions = {},
  ): Parameter {
    checkTensorOptionKeys('Parameter.deferred', options, createParameterOptionKeys, pytorchParameterNames);
    const storage = Storage.unallocated(
      options.dtype ?? 'float32',
      shapeNumel(shape),
      storageOptions(options),
    );
    const parameter = new Parameter(new TensorView(storage, 0, shape), parameterOptions(options));
    parameter.deferredInitializer = initializer;
    return parameter;
  }

  /** True while the values exist only as an initializer (see [Note: deferred parameters]). */
  get isDeferred(): boolean {
    return this.deferredInitializer !== null;
  }

  /** The initializer of a deferred Parameter; null once it has values. */
  get initializer(): ParameterInitializer | null {
    return this.deferredInitializer;
  }

  /** Makes a deferred Parameter's values in its own storage (no-op otherwise). */
  materialize(): this {
    const initializer = this.deferredInitializer;
    if (initializer === null) return this;
    this.dataView.storage.allocate();
    if (this.numel > 0) initializer.fill(this.dataView.flatten(), 0);
    this.deferredInitializer = null;
    return this;
  }

  /**
   * Writes elements [start, start + target.numel) of the values, row-major, into `target` (1-D,
   * contiguous, this dtype), from the initializer when deferred (nothing else is made) or from
   * `data`, which must then have the full shape.
   */
  copyValuesInto(target: TensorView, start: number): void {
    if (target.numel === 0) return;
    if (start < 0 || start + target.numel > this.numel || target.rank !== 1 || !target.isContiguous) {
      throw new TensorError(`${this}: cannot copy elements [${start}, ${start + target.numel}).`, {
        code: 'invalid-argument',
        expected: `a contiguous 1-D target inside [0, ${this.numel})`,
        actual: { start, shape: target.shape, contiguous: target.isContiguous },
        fix: 'pass a contiguous 1-D target view and a start with start + target.numel <= parameter.numel.',
      });
    }
    if (this.deferredInitializer !== null) {
      if (target.dtype !== this.dtype) {
        throw new TensorError(`${this}: cannot make ${this.dtype} values into a ${target.dtype} view.`, {
          code: 'dtype-mismatch',
          expected: this.dtype,
          actual: target.dtype,
          fix: 'pass a target of the parameter dtype.',
        });
      }
      this.deferredInitializer.fill(target, start);
      return;
    }
    target.copyFrom(this.dataView.contiguous().flatten().narrow(0, start, target.numel));
  }

  /** The view the parameter's values live in: its full shape, or a 1-D part such as its shard. */
  get data(): TensorView {
    return this.dataView;
  }

  /**
   * Points the parameter at another view of its full shape or a 1-D part of it; throws a TensorError on
   * another shape.
   */
  set data(view: TensorView) {
    this.checkView(view, 'data');
    this.dataView = view;
    this.deferredInitializer = null;
  }

  /** The gradient view, or null when the parameter has no gradient. */
  get grad(): TensorView | null {
    return this.gradView;
  }

  /** Points the gradient at a view of the full shape or a 1-D part of it, or clears it with null. */
  set grad(view: TensorView | null) {
    if (view !== null) this.checkView(view, 'grad');
    this.gradView = view;
  }

  /** True when `data` has the original shape (not a sharded 1-D part). */
  get isFullShape(): boolean {
    return shapesEqual(this.dataView.shape, this.shape);
  }

  /** The parameter's name, shape and dtype, for messages. */
  toString(): string {
    const deferred =
      this.deferredInitializer === null ? '' : `, deferred ${this.deferredInitializer.description}`;
    return `Parameter(${this.name || `#${this.id}`}: ${this.dtype}${formatShape(this.shape)}${deferred})`;
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

function parameterOptions(options: ParameterOptions): ParameterOptions {
  return {
    ...(options.name === undefined ? {} : { name: options.name }),
    ...(options.requiresGrad === undefined ? {} : { requiresGrad: options.requiresGrad }),
  };
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

import * as tf from '@tensorflow/tfjs-core';

/**
 * [Note: array kernels]
 * A small op (layer norm, GELU, cross-entropy) written as several tfjs ops costs one kernel
 * dispatch per op forward and more backward, 10-70 µs each; at batch 1 × 16 those dispatches,
 * not the arithmetic, were most of a training step (see
 * architecture/performance.md, "Fewer tfjs ops: array kernels"). An array kernel is one registered tfjs
 * kernel whose function is a loop over the backends' own memory:
 *   - on wasm, views of the wasm heap taken after every output is allocated (allocation may grow,
 *     and so detach, the heap; the loops do not allocate on it);
 *   - on cpu, the backend's typed arrays, outputs as new arrays handed to it.
 * Each kernel's gradient is another array kernel (tf.registerGradient), so a forward plus its
 * backward is two dispatches. Registration is lazy (first use, per backend), so importing nn
 * registers nothing. Other backends (webgl, tensorflow) keep the tfjs-op forms; `arrayKernelsRun`
 * says which applies.
 */
export interface ArrayKernel {
  name: string;
  /** Input names, in the order `compute` receives their arrays. */
  inputs: readonly string[];
  /** Shape of every output, from the inputs' shapes and the attributes. */
  outputShapes(shapes: readonly (readonly number[])[], attrs: tf.NamedAttrMap): number[][];
  /** Writes every element of every output. Inputs are float32 or int32 arrays. */
  compute(
    inputs: readonly (Float32Array | Int32Array)[],
    outputs: readonly Float32Array[],
    shapes: readonly (readonly number[])[],
    attrs: tf.NamedAttrMap,
  ): void;
  /** A wasm-specific kernel function replacing `compute` there (to call wasm's own kernels). */
  wasm?: (
    backend: WasmBackendLike,
    inputs: readonly tf.TensorInfo[],
    attrs: tf.NamedAttrMap,
  ) => tf.TensorInfo[];
}

/** The parts of tfjs-backend-wasm's BackendWasm used here. */
export interface WasmBackendLike {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(info: tf.TensorInfo): tf.TypedArray;
  disposeData(dataId: tf.DataId, force?: boolean): boolean;
}

/** The parts of tfjs-backend-cpu's MathBackendCPU used here. */
interface CpuBackendLike {
  data: { get(dataId: unknown): { values?: unknown } };
  makeTensorInfo(shape: number[], dtype: tf.DataType, values: tf.TypedArray): tf.TensorInfo;
  readSync(dataId: unknown): tf.backend_util.BackendValues;
}

const SUPPORTED_BACKENDS = new Set(['wasm', 'cpu']);

/** True when the active backend runs array kernels (wasm or cpu). */
export function arrayKernelsRun(): boolean {
  return SUPPORTED_BACKENDS.has(tf.getBackend());
}

function size(shape: readonly number[]): number {
  let count = 1;
  for (const extent of shape) count *= extent;
  return count;
}

function wasmKernel(kernel: ArrayKernel): tf.KernelFunc {
  return ((args: { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap }) => {
    const backend = args.backend as WasmBackendLike;
    const attrs = args.attrs ?? {};
    const infos = kernel.inputs.map((name) => args.inputs[name]!);
    if (kernel.wasm !== undefined) return kernel.wasm(backend, infos, attrs);
    const shapes = infos.map((info) => info.shape);
    const outputs = kernel.outputShapes(shapes, attrs).map((shape) => backend.makeOutput(shape, 'float32'));
    // [Note: array kernels]: every view is taken after the last allocation.
    kernel.compute(
      infos.map((info) => backend.typedArrayFromHeap(info) as Float32Array | Int32Array),
      outputs.map((info) => backend.typedArrayFromHeap(info) as Float32Array),
      shapes,
      attrs,
    );
    return outputs;
  }) as unknown as tf.KernelFunc;
}

function cpuKernel(kernel: ArrayKernel): tf.KernelFunc {
  return ((args: { inputs: tf.NamedTensorInfoMap; backend: unknown; attrs?: tf.NamedAttrMap }) => {
    const backend = args.backend as CpuBackendLike;
    const attrs = args.attrs ?? {};
    const infos = kernel.inputs.map((name) => args.inputs[name]!);
    const shapes = infos.map((info) => info.shape);
    const inputs = infos.map((info) => {
      const values = backend.data.get(info.dataId).values;
      return (values ?? backend.readSync(info.dataId)) as Float32Array | Int32Array;
    });
    const outputShapes = kernel.outputShapes(shapes, attrs);
    const outputs = outputShapes.map((shape) => new Float32Array(size(shape)));
    kernel.compute(inputs, outputs, shapes, attrs);
    return outputShapes.map((shape, index) => backend.makeTensorInfo(shape, 'float32', outputs[index]!));
  }) as unknown as tf.KernelFunc;
}

/** Registers `kernel` for the active backend if it is not yet (see [Note: array kernels]). */
export function ensureArrayKernel(kernel: ArrayKernel): void {
  const backendName = tf.getBackend();
  if (tf.getKernel(kernel.name, backendName) !== undefined) return;
  tf.registerKernel({
    kernelName: kernel.name,
    backendName,
    kernelFunc: backendName === 'wasm' ? wasmKernel(kernel) : cpuKernel(kernel),
  });
}

/** Registers a kernel's gradient once per process (gradients are not per backend). */
export function ensureArrayGradient(config: tf.GradConfig): void {
  if (tf.getGradient(config.kernelName) !== undefined) return;
  tf.registerGradient(config);
}

/** Runs an array kernel (registering it and its gradient first) and returns its outputs. */
export function runArrayKernel(
  kernel: ArrayKernel,
  gradient: tf.GradConfig | null,
  inputs: tf.NamedTensorMap,
  attrs: tf.NamedAttrMap = {},
): tf.Tensor[] {
  ensureArrayKernel(kernel);
  if (gradient !== null) ensureArrayGradient(gradient);
  const result = tf.engine().runKernel(kernel.name, inputs, attrs) as tf.Tensor | tf.Tensor[];
  return Array.isArray(result) ? result : [result];
}

/**
 * [Note: saved second outputs]
 * GELU and causal attention compute, besides their output, a tensor only their backward needs
 * (the sigmoid, the attention probabilities). As a kernel's second output it was on the tape as
 * an output, and tfjs hands every output nothing downstream differentiated a zero gradient: a
 * fresh zero array of its size (`makeZerosTypedArray`) uploaded to the backend, every backward.
 * For the reference GPT at 8 × 128 that was 25 MB a step of fresh ArrayBuffers, all garbage,
 * and the external-memory pressure started a full V8 marking cycle ~1.5 times a step, whose
 * concurrent marking runs on other threads (the second core under FSDP). Here the kernel runs
 * inside one tape node (tfjs's custom-gradient invocation) whose only output is the first one;
 * the second is saved for the backward, not output, so no zero gradient is made for it.
 */
export function runArrayKernelSavingSecondOutput(
  kernel: ArrayKernel,
  inputs: tf.NamedTensorMap,
  attrs: tf.NamedAttrMap,
  backward: (dy: tf.Tensor, savedInputs: tf.Tensor[], second: tf.Tensor) => tf.Tensor[],
): tf.Tensor {
  ensureArrayKernel(kernel);
  const names = kernel.inputs;
  const run = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const save = args[names.length] as tf.GradSaveFunc;
    const tensors = args.slice(0, names.length) as tf.Tensor[];
    const map: tf.NamedTensorMap = {};
    names.forEach((name, index) => {
      map[name] = tensors[index]!;
    });
    const [output, second] = tf.engine().runKernel(kernel.name, map, attrs) as tf.Tensor[];
    save([...tensors, second!]); // the engine disposes `second` itself when this returns
    return {
      value: output!,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) =>
        backward(dy, saved.slice(0, names.length), saved[names.length]!),
    };
  });
  return run(...names.map((name) => inputs[name]!));
}

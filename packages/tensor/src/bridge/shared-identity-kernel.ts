import * as tf from '@tensorflow/tfjs-core';

interface ReferenceCountingBackend {
  incRef(dataId: tf.DataId): void;
}

/**
 * [Note: shared identity]
 * tfjs 4.22's wasm Identity kernel copies its input into a new heap allocation, while the cpu
 * backend's shares the input's dataId (one more reference). Identity is what `tf.clone` runs and
 * what the engine runs to save every tensor a gradient needs (`saveTensorsForBackwardMode`, the
 * `save` of a customGrad). On wasm every saved activation and every saved parameter was therefore
 * a second copy, and a tensor the tape saved never shared memory with the tensor it was saved
 * from. This kernel makes wasm behave like cpu: the output is the input's dataId with its
 * reference count raised. tfjs tensors are immutable (kernels write only into the outputs they
 * allocate), so sharing is safe; it is also what wasm's own Reshape does.
 *
 * FSDP relies on it: the tensors the tape saved for a unit's backward share their dataId with
 * the parameter tensors, so releasing and restoring that dataId (ReleasableTensor) reaches them.
 */
function sharedIdentity(args: { inputs: tf.NamedTensorInfoMap; backend: unknown }): tf.TensorInfo {
  const x = args.inputs.x!;
  (args.backend as ReferenceCountingBackend).incRef(x.dataId);
  return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
}

/** Replaces `backendName`'s Identity kernel with the sharing one (see the note above). */
export function registerSharedIdentity(backendName: string): void {
  const current = tf.getKernel('Identity', backendName);
  if (current?.kernelFunc === (sharedIdentity as unknown as tf.KernelFunc)) return;
  if (current !== undefined) tf.unregisterKernel('Identity', backendName);
  tf.registerKernel({
    kernelName: 'Identity',
    backendName,
    kernelFunc: sharedIdentity as unknown as tf.KernelFunc,
  });
}

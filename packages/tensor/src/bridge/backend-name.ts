/** The compute backends fsdp-ts can run on, fastest first (the ladder). */
export type BackendName = 'tfjs-node-gpu' | 'tfjs-node' | 'wasm' | 'cpu';

/** The backends tried, in this order, when none is named. */
export const backendLadder: readonly BackendName[] = ['tfjs-node-gpu', 'tfjs-node', 'wasm', 'cpu'];

/** The tfjs backend name each rung registers under. */
export const tfjsBackendNames: Record<BackendName, string> = {
  'tfjs-node-gpu': 'tensorflow',
  'tfjs-node': 'tensorflow',
  wasm: 'wasm',
  cpu: 'cpu',
};

/** The npm package that provides each rung. */
export const backendPackages: Record<BackendName, string> = {
  'tfjs-node-gpu': '@tensorflow/tfjs-node-gpu',
  'tfjs-node': '@tensorflow/tfjs-node',
  wasm: '@tensorflow/tfjs-backend-wasm',
  cpu: '@tensorflow/tfjs-backend-cpu',
};

/** True when the value names a known backend. */
export function isBackendName(value: unknown): value is BackendName {
  return typeof value === 'string' && (backendLadder as readonly string[]).includes(value);
}

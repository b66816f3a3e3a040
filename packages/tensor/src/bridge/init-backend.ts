import * as tf from '@tensorflow/tfjs-core';
import { TensorError } from '../errors';
import {
  type BackendName,
  backendLadder,
  backendPackages,
  isBackendName,
  tfjsBackendNames,
} from './backend-name';
import { registerMatMulGradient } from './mat-mul';
import { nativeMatMul } from './native/native-mat-mul';
import { registerSharedIdentity } from './shared-identity-kernel';
import { registerUnsortedSegmentSum } from './unsorted-segment-sum-kernel';

/** Environment variable that overrides the backend ladder, e.g. `FSDP_BACKEND=cpu`. */
export const BACKEND_ENVIRONMENT_VARIABLE = 'FSDP_BACKEND';

let current: BackendName | null = null;

/** The backend picked by `initBackend`, or null before it ran. */
export function currentBackend(): BackendName | null {
  return current;
}

/**
 * Picks the compute backend once and registers what training needs that tfjs 4.22 lacks.
 *
 * Order: the `preferred` argument, else `FSDP_BACKEND`, else the ladder tfjs-node-gpu → tfjs-node
 * → wasm → cpu (the first that loads). A forced backend that cannot load is an error that says
 * how to install it; the ladder skips rungs that are not installed. Calling again with another
 * backend switches (tests run both cpu and wasm in one process).
 *
 * On wasm and cpu, tf.matMul then runs OpenBLAS's cblas_sgemm when a library loads (see
 * [Note: BLAS search order]; `FSDP_BLAS=off` disables it), else the backend's own kernel and one
 * printed line says how to get the native one. `computeInfo()` reports which is active.
 */
export async function initBackend(preferred?: BackendName): Promise<BackendName> {
  const forced = preferred ?? readEnvironmentChoice();
  await registerTrainingSupport();
  if (forced !== undefined) {
    await activate(forced, true);
    return forced;
  }
  for (const name of backendLadder) {
    if (await activate(name, false)) return name;
  }
  throw new TensorError('No tfjs backend could be initialised.', {
    code: 'backend-unavailable',
    expected: backendLadder,
    actual: 'none loaded',
    fix: 'reinstall @fsdp-ts/tensor (it depends on @tensorflow/tfjs-backend-wasm and -cpu).',
  });
}

function readEnvironmentChoice(): BackendName | undefined {
  const value = process.env[BACKEND_ENVIRONMENT_VARIABLE];
  if (value === undefined || value === '') return undefined;
  if (!isBackendName(value)) {
    throw new TensorError(`${BACKEND_ENVIRONMENT_VARIABLE}=${value} is not a backend.`, {
      code: 'invalid-argument',
      expected: backendLadder,
      actual: value,
      fix: `set ${BACKEND_ENVIRONMENT_VARIABLE} to one of ${backendLadder.join(', ')}, or unset it.`,
    });
  }
  return value;
}

let supportRegistered = false;

/** Gradients (tfjs-core alone registers none: [Note: gradient registration]) and our fixes. */
async function registerTrainingSupport(): Promise<void> {
  if (supportRegistered) return;
  await import('#register-all-gradients');
  registerMatMulGradient();
  supportRegistered = true;
}

/**
 * [Note: no Emscripten exit handlers]
 * tfjs-backend-wasm's Emscripten glue adds process handlers for 'uncaughtException' (it rethrows,
 * so Node exits with code 7 and a stack that starts in the glue) and 'unhandledRejection' (it
 * throws). After the backend started, the handlers added meanwhile are removed again: an uncaught
 * error then ends the process as Node does by default, printing the error itself (its name,
 * message, fix and typed fields such as `code`) and exiting with code 1.
 */
type ExitEvent = 'uncaughtException' | 'unhandledRejection';

function removeAddedExitHandlers(event: ExitEvent, before: readonly unknown[]): void {
  const listeners: unknown[] = process.listeners(event as 'uncaughtException');
  for (const listener of listeners) {
    if (!before.includes(listener))
      process.removeListener(event as 'uncaughtException', listener as () => void);
  }
}

async function activate(name: BackendName, forced: boolean): Promise<boolean> {
  const uncaught = process.listeners('uncaughtException');
  const rejection = process.listeners('unhandledRejection');
  try {
    return await activateBackend(name, forced);
  } finally {
    removeAddedExitHandlers('uncaughtException', uncaught);
    removeAddedExitHandlers('unhandledRejection', rejection);
  }
}

async function activateBackend(name: BackendName, forced: boolean): Promise<boolean> {
  try {
    await import(/* @vite-ignore */ backendPackages[name]);
  } catch (error) {
    if (!forced) return false;
    throw new TensorError(
      `Backend '${name}' was asked for but ${backendPackages[name]} is not installed or failed to load.`,
      {
        code: 'backend-unavailable',
        expected: `${backendPackages[name]} installed`,
        actual: error instanceof Error ? error.message.split('\n')[0] : String(error),
        fix:
          name === 'tfjs-node' || name === 'tfjs-node-gpu'
            ? `run \`npm install ${backendPackages[name]}@4.22.0\` on a machine that can download its native library, or use FSDP_BACKEND=wasm.`
            : `run \`npm install ${backendPackages[name]}@4.22.0\`.`,
        cause: error,
      },
    );
  }
  const tfjsName = tfjsBackendNames[name];
  const ok = await tf.setBackend(tfjsName).catch(() => false);
  if (!ok) {
    if (!forced) return false;
    throw new TensorError(`Backend '${name}' is installed but tfjs could not start it.`, {
      code: 'backend-unavailable',
      expected: `tf.setBackend('${tfjsName}') to succeed`,
      actual: 'false',
      fix: 'check the console output above for the backend error, or pick another backend.',
    });
  }
  if (name === 'wasm') {
    registerUnsortedSegmentSum('wasm');
    registerSharedIdentity('wasm');
  }
  await nativeMatMul.activate(tfjsName);
  current = name;
  return true;
}

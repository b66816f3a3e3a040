import {
  type BlasLoadResult,
  blasSearchOrder,
  floatAdd,
  loadBlas,
  type NativeFloatAdd,
  type Sgemm,
} from '@fsdp-ts/kernels';
import * as tf from '@tensorflow/tfjs-core';
import { cpuBlasFusedMatMul, wasmBlasFusedMatMul } from './blas-fused-mat-mul-kernels';
import { cpuBlasMatMul, wasmBlasMatMul } from './blas-mat-mul-kernels';
import {
  BLAS_LIBRARY_ENVIRONMENT_VARIABLE,
  BLAS_SWITCH_ENVIRONMENT_VARIABLE,
  type BlasSettings,
  readBlasSettings,
} from './blas-settings';

/** What runs `tf.matMul` on the active backend. */
export interface MatMulInfo {
  /** 'blas': cblas_sgemm through koffi; 'backend': the backend's own kernel. */
  matMul: 'blas' | 'backend';
  /** The library that loaded (name or path), or null. */
  blasLibrary: string | null;
  /** `openblas_get_config()`, e.g. "OpenBLAS 0.3.21 ... Zen MAX_THREADS=64", or null. */
  blasConfig: string | null;
  /** BLAS threads per process, or null when no library is loaded. */
  blasThreads: number | null;
  /** Why matMul is 'backend', or null when it is 'blas'. */
  reason: string | null;
}

/**
 * The backends whose matMul kernels can be replaced (their tensors live in JS-reachable memory),
 * and per kernel name the BLAS kernel for each. `_FusedMatMul` is tf.fused.matMul, which every
 * tfjs-layers Dense runs; tfjs's cpu version calls its own JavaScript matMul directly, not the
 * registered BatchMatMul, so it needs its own replacement.
 */
const blasKernels = {
  BatchMatMul: { wasm: wasmBlasMatMul, cpu: cpuBlasMatMul },
  _FusedMatMul: { wasm: wasmBlasFusedMatMul, cpu: cpuBlasFusedMatMul },
} as const;
type BlasKernelName = keyof typeof blasKernels;
const blasKernelNames = Object.keys(blasKernels) as BlasKernelName[];
type BlasBackend = keyof (typeof blasKernels)['BatchMatMul'];

function isBlasBackend(name: string): name is BlasBackend {
  return name === 'wasm' || name === 'cpu';
}

export const INSTALL_HINT = 'apt-get install libopenblas0-pthread';

/**
 * The one owner of native matMul state in this process: the settings, the loaded library, and
 * which backends currently run the BLAS kernel (with the kernel each replaced, to restore it).
 */
class NativeMatMul {
  #settings: BlasSettings | null = null;
  #enabled: boolean | null = null;
  #load: BlasLoadResult | null = null;
  #floatAdd: NativeFloatAdd | null = null;
  /** Per backend, the kernels replaced (by name) with the config each replaced. */
  readonly #replaced = new Map<BlasBackend, Map<BlasKernelName, tf.KernelConfig>>();
  #noticePrinted = false;

  /** Called by initBackend after `backend` became active: installs or explains. */
  async activate(backend: string): Promise<void> {
    this.#settings ??= readBlasSettings();
    this.#enabled ??= this.#settings.enabled;
    if (!isBlasBackend(backend)) return;
    if (!this.#enabled) {
      this.#uninstall(backend);
      return;
    }
    const load = await this.#loadOnce();
    if (load.loaded) this.#install(backend);
    else this.#printNotice(load);
  }

  /** Turns native matMul on or off for the active backend and every later initBackend. */
  async setEnabled(enabled: boolean): Promise<MatMulInfo> {
    this.#settings ??= readBlasSettings();
    this.#enabled = enabled;
    await this.activate(tf.getBackend());
    return this.info(tf.getBackend());
  }

  /** True when `backend`'s BatchMatMul is the BLAS kernel (transpose flags then cost nothing). */
  isActive(backend: string): boolean {
    return isBlasBackend(backend) && this.#replaced.has(backend);
  }

  /** The loaded sgemm when `backend` runs the BLAS kernel, else null. */
  sgemm(backend: string): Sgemm | null {
    return this.isActive(backend) && this.#load?.loaded === true ? this.#load.library.sgemm : null;
  }

  /**
   * The loaded library's in-place float32 add (`cblas_saxpy` with alpha 1, bit-identical to a
   * float32 add), whether or not the matMul kernels are on; null when no library is loaded.
   */
  floatAdd(): NativeFloatAdd | null {
    if (this.#load?.loaded !== true) return null;
    this.#floatAdd ??= floatAdd(this.#load.library);
    return this.#floatAdd;
  }

  info(backend: string): MatMulInfo {
    const library = this.#load?.loaded === true ? this.#load.library : null;
    const common = {
      blasLibrary: library?.path ?? null,
      blasConfig: library?.config ?? null,
      blasThreads: library?.threads ?? null,
    };
    if (this.isActive(backend)) return { matMul: 'blas', ...common, reason: null };
    let reason: string;
    if (!isBlasBackend(backend)) reason = `the ${backend} backend has its own native matMul`;
    else if (this.#enabled === false)
      reason = `disabled (${BLAS_SWITCH_ENVIRONMENT_VARIABLE}=off or setNativeMatMul(false))`;
    else if (this.#load?.loaded === false) reason = `no BLAS library loaded: ${this.#load.reason}`;
    else reason = 'initBackend() has not run';
    return { matMul: 'backend', ...common, reason };
  }

  async #loadOnce(): Promise<BlasLoadResult> {
    if (this.#load === null) {
      const settings = this.#settings!;
      this.#floatAdd = null;
      this.#load = loadBlas(settings.library === null ? blasSearchOrder : [settings.library], {
        threads: settings.threads,
      });
    }
    return this.#load;
  }

  #install(backend: BlasBackend): void {
    if (this.#replaced.has(backend) || this.#load?.loaded !== true) return;
    const library = this.#load.library;
    const replaced = new Map<BlasKernelName, tf.KernelConfig>();
    for (const name of blasKernelNames) {
      const original = tf.getKernel(name, backend);
      if (original === undefined) continue;
      tf.unregisterKernel(name, backend);
      tf.registerKernel({
        ...original,
        kernelFunc: blasKernels[name][backend](library, original.kernelFunc),
      });
      replaced.set(name, original);
    }
    if (replaced.size > 0) this.#replaced.set(backend, replaced);
  }

  #uninstall(backend: BlasBackend): void {
    const replaced = this.#replaced.get(backend);
    if (replaced === undefined) return;
    for (const [name, original] of replaced) {
      tf.unregisterKernel(name, backend);
      tf.registerKernel(original);
    }
    this.#replaced.delete(backend);
  }

  #printNotice(load: Extract<BlasLoadResult, { loaded: false }>): void {
    if (this.#noticePrinted) return;
    this.#noticePrinted = true;
    const detail = `(${load.reason.slice(0, 160)})`;
    if (load.tried.length === 0) {
      // koffi itself did not load: it is an optional peer dependency of this package.
      console.warn(
        `fsdp-ts: native matMul needs the koffi package, which did not load, so tfjs's own matMul runs (3-9x slower on CPU). Fix: \`npm install koffi\` and \`${INSTALL_HINT}\` (Debian/Ubuntu); ${BLAS_SWITCH_ENVIRONMENT_VARIABLE}=off silences this. ${detail}`,
      );
      return;
    }
    const which =
      this.#settings?.library === null
        ? 'no OpenBLAS found'
        : `${BLAS_LIBRARY_ENVIRONMENT_VARIABLE}=${this.#settings?.library} did not load`;
    console.warn(
      `fsdp-ts: ${which}, so tfjs's own matMul runs (3-9x slower on CPU). Fix: \`${INSTALL_HINT}\` (Debian/Ubuntu) or set ${BLAS_LIBRARY_ENVIRONMENT_VARIABLE} to a CBLAS library; ${BLAS_SWITCH_ENVIRONMENT_VARIABLE}=off silences this. ${detail}`,
    );
  }
}

export const nativeMatMul = new NativeMatMul();

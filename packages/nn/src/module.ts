import type { OptionKeys } from '@fsdp-ts/errors';
import { type Parameter, shapesEqual, type TensorView } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import { NnError, StateDictError, type StateDictShapeMismatch } from './errors';
import {
  addForwardHook,
  type ForwardHook,
  type ForwardPreHook,
  type ForwardWrapper,
  type RemovableHandle,
} from './forward-hooks';
import { checkNnOptionKeys } from './internal/check-option-keys';
import { parameterTensor } from './parameter-scope';

/** A state dict: dotted names to views, in registration order. */
export type StateDict = Record<string, TensorView>;

/** Options of loadStateDict. */
export interface LoadStateDictOptions {
  /** Default true: every missing or unexpected key is an error (all listed in one StateDictError). */
  strict?: boolean;
}

/** The keys of LoadStateDictOptions ([Note: option keys] in @fsdp-ts/errors). */
const loadStateDictOptionKeys = { strict: true } as const satisfies OptionKeys<LoadStateDictOptions>;

/** What loadStateDict returns: the keys it did not find and the keys it did not expect. */
export interface LoadStateDictResult {
  missingKeys: string[];
  unexpectedKeys: string[];
}

/**
 * The base of every layer and model: a tree of named parameters, buffers and child modules.
 *
 * Register from class field initialisers, which run after this constructor:
 * ```ts
 * class Model extends Module {
 *   layer = this.registerModule('layer', new Linear(5, 5));
 *   forward(x: tf.Tensor) { return this.layer.forward(x); }
 * }
 * ```
 * [Note: tied parameters]
 * The same Parameter may be registered in several modules (a GPT's token embedding and its lm
 * head). Every traversal lists a Parameter once, under the first name met in registration order
 * (depth first), so optimizers and state dicts see it once and `backward` sums its gradients.
 */
export abstract class Module {
  private readonly ownParameters = new Map<string, Parameter>();
  private readonly ownBuffers = new Map<string, TensorView>();
  private readonly ownChildren = new Map<string, Module>();
  /** True in training mode (dropout active), false after `eval()`. */
  training = true;

  /** The module's computation. Subclasses declare their own signature. */
  abstract forward(...inputs: never[]): unknown;

  /** Runs `hook` before every call of this instance's forward (see [Note: forward hooks]). */
  registerForwardPreHook(hook: ForwardPreHook): RemovableHandle {
    return addForwardHook(this, 'pre', hook);
  }

  /** Runs `hook` after every call of this instance's forward (see [Note: forward hooks]). */
  registerForwardHook(hook: ForwardHook): RemovableHandle {
    return addForwardHook(this, 'post', hook);
  }

  /** Runs every call of this instance's forward through `wrapper` (see [Note: forward hooks]). */
  registerForwardWrapper(wrapper: ForwardWrapper): RemovableHandle {
    return addForwardHook(this, 'wrappers', wrapper);
  }

  /** Registers a parameter under `name` and returns it. */
  registerParameter<P extends Parameter>(name: string, parameter: P): P {
    this.checkName(name);
    if (parameter.name === '') parameter.name = name;
    this.ownParameters.set(name, parameter);
    return parameter;
  }

  /** Registers a buffer (state that is saved but not trained) under `name` and returns it. */
  registerBuffer(name: string, view: TensorView): TensorView {
    this.checkName(name);
    this.ownBuffers.set(name, view);
    return view;
  }

  /** Registers a submodule under `name` and returns it. */
  registerModule<M extends Module>(name: string, module: M): M {
    this.checkName(name);
    this.ownChildren.set(name, module);
    return module;
  }

  /** The tf.Tensor standing for one of this module's parameters (see [Note: parameter tensor scope]). */
  protected tensor(parameter: Parameter): tf.Tensor {
    return parameterTensor(parameter);
  }

  /** Every parameter of this module and its descendants, each once, with its dotted name. */
  namedParameters(prefix = ''): [string, Parameter][] {
    const seen = new Set<Parameter>();
    const result: [string, Parameter][] = [];
    for (const [modulePrefix, module] of this.namedModules(prefix)) {
      for (const [name, parameter] of module.ownParameters) {
        if (seen.has(parameter)) continue;
        seen.add(parameter);
        result.push([join(modulePrefix, name), parameter]);
      }
    }
    return result;
  }

  /** Every parameter of this module and its submodules. */
  parameters(): Parameter[] {
    return this.namedParameters().map(([, parameter]) => parameter);
  }

  /** Every buffer of this module and its submodules, with its dotted name. */
  namedBuffers(prefix = ''): [string, TensorView][] {
    const result: [string, TensorView][] = [];
    for (const [modulePrefix, module] of this.namedModules(prefix)) {
      for (const [name, view] of module.ownBuffers) result.push([join(modulePrefix, name), view]);
    }
    return result;
  }

  /** Every buffer of this module and its submodules. */
  buffers(): TensorView[] {
    return this.namedBuffers().map(([, view]) => view);
  }

  /** This module and every descendant, each once, depth first; this module's name is `prefix`. */
  namedModules(prefix = ''): [string, Module][] {
    const seen = new Set<Module>();
    const result: [string, Module][] = [];
    const visit = (name: string, module: Module) => {
      if (seen.has(module)) return;
      seen.add(module);
      result.push([name, module]);
      for (const [childName, child] of module.ownChildren) visit(join(name, childName), child);
    };
    visit(prefix, this);
    return result;
  }

  /** This module and every submodule, depth first. */
  modules(): Module[] {
    return this.namedModules().map(([, module]) => module);
  }

  /** The direct submodules, with their names. */
  namedChildren(): [string, Module][] {
    return [...this.ownChildren];
  }

  /** The direct submodules. */
  children(): Module[] {
    return [...this.ownChildren.values()];
  }

  /** Sets training mode on this module and every descendant. */
  train(mode = true): this {
    for (const module of this.modules()) module.training = mode;
    return this;
  }

  /** Puts this module and its submodules in evaluation mode (dropout off) and returns it. */
  eval(): this {
    return this.train(false);
  }

  /** Calls `fn` on every descendant, then on this module (children first, like PyTorch). */
  apply(fn: (module: Module) => void): this {
    for (const child of this.ownChildren.values()) child.apply(fn);
    fn(this);
    return this;
  }

  /** Parameters and buffers by dotted name. The views alias the module's memory (no copy). */
  stateDict(): StateDict {
    const dict: StateDict = {};
    for (const [name, parameter] of this.namedParameters()) dict[name] = parameter.data;
    for (const [name, view] of this.namedBuffers()) dict[name] = view;
    return dict;
  }

  /**
   * Copies the values of `dict` into this module's parameters and buffers (converting dtypes).
   * Shape mismatches are always errors; with `strict` (the default) so are missing and unexpected
   * keys. Every problem is reported in one StateDictError, and nothing is copied when it throws.
   * A tied Parameter loads from any one of its names (see [Note: loading tied parameters]).
   */
  loadStateDict(dict: StateDict, options: LoadStateDictOptions = {}): LoadStateDictResult {
    checkNnOptionKeys('loadStateDict', options, loadStateDictOptionKeys, {
      assign: 'no equivalent: values are copied into the existing Parameters; remove it',
    });
    const strict = options.strict ?? true;
    // [Note: loading tied parameters]
    // A tied Parameter is one value under several names. PyTorch's state_dict() lists every name;
    // safetensors.torch.save_model keeps only one of each tied pair (for a GPT, lmHead.weight, not
    // our first name tokenEmbedding.weight). So a tied Parameter is missing only when none of its
    // names is in the dict, every name present is shape-checked, and the value loaded is the one
    // under its first name present (registration order, as namedParameters lists it).
    const names = new Map<Parameter, string[]>();
    for (const [name, parameter] of this.namedParameters()) {
      if (!parameter.isFullShape) {
        throw new NnError(`loadStateDict: ${parameter} is sharded.`, {
          code: 'parameter-not-full-shape',
          expected: `data of shape [${parameter.shape.join(', ')}]`,
          actual: parameter.data.shape,
          fix: "use the FSDP wrapper's state dict methods for a sharded model.",
        });
      }
      names.set(parameter, [name]);
    }
    for (const [name, parameter] of this.allParameterPaths()) {
      const known = names.get(parameter)!;
      if (!known.includes(name)) known.push(name);
    }
    const targets = new Map<string, TensorView>(); // every name the module accepts
    const loads: [key: string, target: TensorView][] = [];
    const missingKeys: string[] = [];
    const entries: [string[], TensorView][] = [
      ...[...names].map(([parameter, keys]): [string[], TensorView] => [keys, parameter.data]),
      ...this.namedBuffers().map(([name, view]): [string[], TensorView] => [[name], view]),
    ];
    for (const [keys, target] of entries) {
      for (const key of keys) targets.set(key, target);
      const present = keys.find((key) => key in dict);
      if (present === undefined) missingKeys.push(keys[0]!);
      else loads.push([present, target]);
    }
    const unexpectedKeys = Object.keys(dict).filter((key) => !targets.has(key));
    const shapeMismatches: StateDictShapeMismatch[] = [];
    for (const [key, target] of targets) {
      const source = dict[key];
      if (source !== undefined && !shapesEqual(source.shape, target.shape)) {
        shapeMismatches.push({ key, expected: target.shape, actual: source.shape });
      }
    }
    const keyProblems = strict && (missingKeys.length > 0 || unexpectedKeys.length > 0);
    if (keyProblems || shapeMismatches.length > 0) {
      throw new StateDictError(strict ? missingKeys : [], strict ? unexpectedKeys : [], shapeMismatches);
    }
    // A deferred Parameter gets its values made first (see [Note: deferred initialisation]),
    // then overwritten: the state dict may hold only some of them (strict: false).
    for (const parameter of names.keys()) parameter.materialize();
    for (const [key, target] of loads) {
      const source = dict[key]!;
      if (source !== target) target.copyFrom(source);
    }
    return { missingKeys, unexpectedKeys };
  }

  /**
   * Every (dotted name, Parameter) registration path: a tied Parameter under each of its names,
   * in registration order, depth first (PyTorch's `named_parameters(remove_duplicate=False)`).
   */
  namedParameterPaths(prefix = ''): [string, Parameter][] {
    return this.allParameterPaths(prefix);
  }

  private allParameterPaths(root = ''): [string, Parameter][] {
    const result: [string, Parameter][] = [];
    const visit = (prefix: string, module: Module, path: Set<Module>) => {
      if (path.has(module)) return;
      for (const [name, parameter] of module.ownParameters) result.push([join(prefix, name), parameter]);
      const inner = new Set(path).add(module);
      for (const [name, child] of module.ownChildren) visit(join(prefix, name), child, inner);
    };
    visit(root, this, new Set());
    return result;
  }

  private checkName(name: string): void {
    const taken = this.ownParameters.has(name) || this.ownBuffers.has(name) || this.ownChildren.has(name);
    if (name === '' || name.includes('.') || taken) {
      throw new NnError(
        `Cannot register '${name}' on ${this.constructor.name}: a name must be non-empty, without dots, and not used yet by a parameter, buffer or child of the module.`,
        {
          code: taken ? 'duplicate-name' : 'invalid-argument',
          expected:
            'a non-empty name without dots, not yet used by a parameter, buffer or child of this module',
          actual: name,
          fix: taken ? 'pick another name.' : 'use a plain identifier such as "weight" or "layer1".',
        },
      );
    }
  }
}

function join(prefix: string, name: string): string {
  return prefix === '' ? name : `${prefix}.${name}`;
}

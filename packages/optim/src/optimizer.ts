import { explainForeignParameter, Parameter } from '@fsdp-ts/tensor';
import { OptimError } from './errors';
import { checkOptimKeys } from './internal/merge-options';
import { type ParameterArrays, parameterArrays } from './internal/parameter-arrays';
import { ParameterState } from './internal/parameter-state';
import { loadOptimizerState, saveOptimizerState } from './internal/state-dict-io';
import {
  type BaseOptions,
  type ParamGroup,
  type ParamGroupInput,
  type ParamsInput,
  type ZeroGradOptions,
  zeroGradOptionKeys,
} from './param-group';
import { type OptimizerStateDict, type StateDictOptions, stateDictOptionKeys } from './state-dict';
import type { OffloadedStateEntry, OptimizerStateOffload } from './state-offload';

/** A parameter ready to be updated this step: its arrays and its (lazily created) state. */
export interface PreparedParameter {
  arrays: ParameterArrays;
  state: ParameterState;
}

/**
 * The base of every optimizer: param groups with defaults, lazily created per-parameter state,
 * `zeroGrad`, and state dicts. Subclasses implement `step()` with fused loops over
 * `param.data`, whatever that view is: full-shape, a 1-D shard part, or empty.
 */
export abstract class Optimizer<Options extends BaseOptions> {
  /** The optimizer's name in state dicts and messages (a getter, so the base constructor can use it). */
  abstract get kind(): string;
  readonly defaults: Readonly<Options>;
  readonly paramGroups: ParamGroup<Options>[] = [];
  protected readonly state = new Map<Parameter, ParameterState>();
  private readonly groupIndexOf = new Map<Parameter, number>();
  /** Where the state buffers live when not here (see [Note: offloaded optimizer state]); null: here. */
  private stateOffload: OptimizerStateOffload | null = null;
  /** With an offload: every parameter in position order with its group. */
  private offloadedEntries: { group: ParamGroup<Options>; param: Parameter }[] = [];

  constructor(params: ParamsInput<Options>, defaults: Options) {
    this.validateGroup(defaults, 'the defaults');
    this.defaults = Object.freeze({ ...defaults });
    const entries: unknown[] = [...(params as Iterable<unknown>)];
    if (entries.length === 0) {
      throw new OptimError('The optimizer got an empty parameter list.', {
        code: 'invalid-group',
        expected: 'at least one Parameter or param group',
        actual: 0,
        fix: 'pass model.parameters() (after the model has registered its parameters) or a list of groups.',
      });
    }
    if (entries.every((entry) => entry instanceof Parameter)) {
      this.addParamGroup({ params: entries as Parameter[] } as unknown as ParamGroupInput<Options>);
    } else {
      for (const entry of entries) this.addParamGroup(entry as ParamGroupInput<Options>);
    }
  }

  /** Checks a group's hyperparameters; throws OptimError('invalid-hyperparameter'). */
  protected abstract validateGroup(group: Options, where: string): void;

  /** Performs one update of every parameter that has a grad and requires one. */
  abstract step(): void;

  /**
   * The names of the state buffers a parameter of `group` has once stepped, for optimizers whose
   * state can live elsewhere (every buffer starts as zeros); null (the default) when it cannot.
   */
  protected stateBufferNames(_group: Options): readonly string[] | null {
    return null;
  }

  /**
   * Keeps the state in `offload` from now on (see [Note: offloaded optimizer state]); state
   * already here moves there. FSDP's `model.offloadOptimizerState(optimizer)` calls it. Throws
   * OptimError 'offload-unsupported' for an optimizer whose state cannot start as zeros (SGD, LARS).
   */
  offloadState(offload: OptimizerStateOffload): void {
    if (this.stateOffload !== null) {
      throw new OptimError(`${this.kind}: the state is already offloaded.`, {
        code: 'offload-unsupported',
        expected: 'one offloadState call per optimizer',
        actual: 'a second call',
        fix: 'attach the optimizer once.',
      });
    }
    const entries: OffloadedStateEntry[] = [];
    const positions: { group: ParamGroup<Options>; param: Parameter }[] = [];
    for (const group of this.paramGroups) {
      const bufferNames = this.stateBufferNames(group);
      if (bufferNames === null) {
        throw new OptimError(`${this.kind} cannot keep its state offloaded.`, {
          code: 'offload-unsupported',
          expected: 'Adam, AdamW or LAMB (state buffers that start as zeros)',
          actual: this.kind,
          fix: 'use AdamW or LAMB with offloaded optimizer state, or turn offload.optimizerState off.',
        });
      }
      for (const param of group.params) {
        entries.push({ parameter: param, numel: param.data.numel, bufferNames });
        positions.push({ group, param });
      }
    }
    offload.attach(entries);
    const moved: { index: number; name: string; values: Float32Array }[] = [];
    positions.forEach(({ param }, index) => {
      const state = this.state.get(param);
      if (state === undefined) return;
      for (const [name, values] of state.buffers) moved.push({ index, name, values });
    });
    if (moved.length > 0) offload.write(moved);
    for (const state of this.state.values()) state.buffers.clear();
    this.stateOffload = offload;
    this.offloadedEntries = positions;
  }

  /**
   * Runs one step's passes: directly, or between the offload's beginStep and endStep (see
   * [Note: offloaded optimizer state]).
   */
  protected runStep(body: () => void): void {
    const offload = this.stateOffload;
    if (offload === null) {
      body();
      return;
    }
    offload.beginStep();
    let failure: unknown;
    try {
      body();
    } catch (error) {
      failure = error ?? new Error('step failed');
    }
    offload.endStep(failure);
  }

  /**
   * Visits every parameter updated this step, in position order, with its arrays and state
   * (`position` counts skipped parameters too). With offloaded state, the state's buffers are
   * views of the resident chunk during the visit; `writes` says whether the visit changes them.
   */
  protected forEachPrepared(
    writes: boolean,
    visit: (group: ParamGroup<Options>, prepared: PreparedParameter, position: number) => void,
  ): void {
    const offload = this.stateOffload;
    if (offload === null) {
      let position = 0;
      for (const group of this.paramGroups) {
        for (const param of group.params) {
          const prepared = this.prepare(param);
          if (prepared !== null) visit(group, prepared, position);
          position += 1;
        }
      }
      return;
    }
    offload.forEachResident(writes, (index, buffers) => {
      const { group, param } = this.offloadedEntries[index]!;
      const prepared = this.prepare(param);
      if (prepared === null) return;
      const { state } = prepared;
      for (const [name, values] of buffers) state.buffers.set(name, values);
      try {
        visit(group, prepared, index);
      } finally {
        state.buffers.clear();
      }
    });
  }

  /** Adds a group; missing hyperparameters come from the defaults. */
  addParamGroup(input: ParamGroupInput<Options>): void {
    const index = this.paramGroups.length;
    const where = `param group ${index}`;
    const foreign = explainForeignParameter(input);
    if (foreign !== undefined) {
      throw new OptimError(`${where} is not a Parameter of this process's @fsdp-ts/tensor: ${foreign}`, {
        code: 'invalid-parameter',
        expected: 'a Parameter of the @fsdp-ts/tensor that @fsdp-ts/optim loaded',
        actual: 'a Parameter of another copy',
        fix: 'load one copy of each @fsdp-ts package (see above).',
      });
    }
    if (typeof input !== 'object' || input === null || !('params' in input)) {
      throw new OptimError(`${where} is not a { params, ...hyperparameters } object.`, {
        code: 'invalid-group',
        expected: '{ params: Iterable<Parameter>, lr?, weightDecay?, ... }',
        actual: (input as unknown) instanceof Parameter ? String(input) : typeof input,
        fix: 'pass either a list of Parameters or a list of groups, not a mix.',
      });
    }
    const candidates: unknown[] =
      (input.params as unknown) instanceof Parameter ? [input.params] : [...input.params];
    const params: Parameter[] = [];
    const seen = new Set<Parameter>();
    for (const param of candidates) {
      const foreign = explainForeignParameter(param);
      if (foreign !== undefined) {
        throw new OptimError(`${where} contains a Parameter that is not this process's: ${foreign}`, {
          code: 'invalid-parameter',
          expected: 'a Parameter of the @fsdp-ts/tensor that @fsdp-ts/optim loaded',
          actual: 'a Parameter of another copy',
          fix: 'load one copy of each @fsdp-ts package (see above).',
        });
      }
      if (!(param instanceof Parameter)) {
        throw new OptimError(`${where} contains ${String(param)}, which is not a Parameter.`, {
          code: 'invalid-parameter',
          expected: 'Parameter',
          actual: typeof param,
          fix: 'build groups from module.parameters() or Parameter objects.',
        });
      }
      const other = seen.has(param) ? index : this.groupIndexOf.get(param);
      if (other !== undefined) {
        throw new OptimError(
          `${param} is in param group ${other} and again in ${where}; a parameter belongs to exactly one group.`,
          {
            code: 'duplicate-parameter',
            parameter: String(param),
            expected: 'each parameter in one group, once',
            actual: { groups: [other, index] },
            fix: 'remove it from one of the groups (e.g. filter the second group by name).',
          },
        );
      }
      seen.add(param);
      params.push(param);
    }
    checkOptimKeys(
      `${where} of ${this.kind}`,
      input,
      ['params', ...Object.keys(this.defaults)],
      'unknown-hyperparameter',
    );
    const hyperparameters: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(input)) {
      if (key === 'params' || value === undefined) continue;
      hyperparameters[key] = value;
    }
    const group = {
      ...this.defaults,
      ...hyperparameters,
      params: Object.freeze(params),
    } as ParamGroup<Options>;
    this.validateGroup(group, where);
    for (const param of params) this.groupIndexOf.set(param, index);
    this.paramGroups.push(group);
  }

  /** Every parameter, in position order (groups in order, then each group's params). */
  get parameters(): Parameter[] {
    return this.paramGroups.flatMap((group) => [...group.params]);
  }

  /** Clears gradients: sets them to null (default) or fills them with zeros in place. */
  zeroGrad(options: ZeroGradOptions = {}): void {
    checkOptimKeys('zeroGrad', options, zeroGradOptionKeys, 'unknown-option', {
      set_to_none: "PyTorch's set_to_none is setToNull here",
      setToNone: "PyTorch's set_to_none is setToNull here",
    });
    const setToNull = options.setToNull ?? true;
    for (const group of this.paramGroups) {
      for (const param of group.params) {
        if (setToNull) param.grad = null;
        else param.grad?.fill(0);
      }
    }
  }

  /** A copy of the state and hyperparameters, keyed by parameter position (and name). */
  stateDict(options: StateDictOptions = {}): OptimizerStateDict {
    checkOptimKeys(`${this.kind}.stateDict`, options, stateDictOptionKeys, 'unknown-option', {});
    const offload = this.stateOffload;
    if (options.buffers === false) {
      // [Note: state dicts without buffers]: steps and hyperparameters, nothing read from an offload.
      const dict = saveOptimizerState(this.kind, this.paramGroups, this.state, false);
      for (const entry of Object.values(dict.state)) entry.buffers = {};
      return dict;
    }
    if (offload === null)
      return saveOptimizerState(this.kind, this.paramGroups, this.state, options.copy ?? true);
    // Offloaded: copies read from the offload (the dict owns them; `copy` changes nothing).
    this.offloadedEntries.forEach(({ group, param }, index) => {
      const state = this.state.get(param);
      if (state === undefined) return;
      for (const name of this.stateBufferNames(group) ?? [])
        state.buffers.set(name, offload.read(index, name));
    });
    try {
      return saveOptimizerState(this.kind, this.paramGroups, this.state, false);
    } finally {
      for (const state of this.state.values()) state.buffers.clear();
    }
  }

  /**
   * Replaces state and hyperparameters with a copy of `stateDict` (with `{ copy: false }`, its
   * buffers become the state). Checks everything (optimizer, group sizes, names, shapes, element
   * counts) before changing anything.
   */
  loadStateDict(stateDict: OptimizerStateDict, options: StateDictOptions = {}): void {
    checkOptimKeys(`${this.kind}.loadStateDict`, options, stateDictOptionKeys, 'unknown-option', {});
    const loaded = loadOptimizerState(
      this.kind,
      this.paramGroups,
      this.defaults,
      stateDict,
      options.copy ?? true,
    );
    for (const [index, hyperparameters] of loaded.hyperparameters.entries()) {
      this.validateGroup({ ...this.paramGroups[index]!, ...hyperparameters }, `param group ${index}`);
    }
    for (const [index, hyperparameters] of loaded.hyperparameters.entries()) {
      Object.assign(this.paramGroups[index]!, hyperparameters);
    }
    const offload = this.stateOffload;
    if (options.buffers === false) {
      // [Note: state dicts without buffers]: the steps change, every buffer stays where it is.
      for (const [param, state] of loaded.state) {
        state.buffers.clear();
        const kept = this.state.get(param);
        if (kept !== undefined && kept.numel === state.numel)
          for (const [name, values] of kept.buffers) state.buffers.set(name, values);
      }
    } else if (offload !== null) {
      const written: { index: number; name: string; values: Float32Array }[] = [];
      this.offloadedEntries.forEach(({ group, param }, index) => {
        const state = loaded.state.get(param);
        if (state === undefined) return;
        const names = this.stateBufferNames(group) ?? [];
        for (const [name, values] of state.buffers) {
          if (!names.includes(name)) {
            throw new OptimError(
              `loadStateDict: ${param} has state '${name}', which ${this.kind} does not keep.`,
              {
                code: 'state-dict-mismatch',
                parameter: String(param),
                expected: names,
                actual: name,
                fix: 'load a state dict saved by the same optimizer with the same hyperparameters (amsgrad).',
              },
            );
          }
          written.push({ index, name, values });
        }
      });
      offload.write(written);
      for (const state of loaded.state.values()) state.buffers.clear();
    }
    this.state.clear();
    for (const [param, state] of loaded.state) this.state.set(param, state);
  }

  /**
   * The arrays and state for updating `param` this step, or null when it is skipped (grad null or
   * requiresGrad false). Creates the state on first use, sized to `param.data`.
   * See [Note: state follows data].
   */
  protected prepare(param: Parameter): PreparedParameter | null {
    const arrays = parameterArrays(param);
    if (arrays === null) return null;
    let state = this.state.get(param);
    if (state === undefined) {
      state = new ParameterState(arrays.data.length);
      this.state.set(param, state);
    } else if (state.numel !== arrays.data.length) {
      throw new OptimError(
        `${param}: the ${this.kind} state holds ${state.numel} elements but data now has ${arrays.data.length}; the parameter was re-sharded (or re-pointed) since the state was created.`,
        {
          code: 'state-numel-mismatch',
          parameter: String(param),
          expected: state.numel,
          actual: arrays.data.length,
          fix: 'keep the same sharding between steps, or save stateDict() under the old layout, re-shard the state, and loadStateDict() it for the new one.',
        },
      );
    }
    return { arrays, state };
  }
}

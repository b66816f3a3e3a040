import { FsdpError } from '../errors';

/**
 * [Note: training state]
 * What the wrapper is doing. One TrainingStateMachine per wrapper owns it; only its methods change
 * it, each through `#transition`, which checks the state it leaves.
 * 'idle'       between steps.
 * 'forward'    inside forward() outside a backward() (evaluation); forwards may nest.
 * 'backward'   from backward()'s plan to its end (the step's forward runs in it too).
 * 'summoning'  inside summonFullParams.
 * Independent of the state: whether backwards reduce their gradients (false inside noSync).
 */
export type TrainingState = 'idle' | 'forward' | 'backward' | 'summoning';

export class TrainingStateMachine {
  #state: TrainingState = 'idle';
  /** Nested forward() calls in progress. */
  #forwardDepth = 0;
  /** false inside noSync: backwards accumulate their gradients unreduced. */
  #syncGradients = true;
  readonly #rank: number;

  constructor(rank: number) {
    this.#rank = rank;
  }

  get state(): TrainingState {
    return this.#state;
  }

  get syncGradients(): boolean {
    return this.#syncGradients;
  }

  /** Throws FsdpError('wrong-state') unless idle. */
  expectIdle(method: string): void {
    const state = this.#state;
    if (state === 'idle') return;
    throw new FsdpError(
      `${method} was called during ${state === 'summoning' ? 'summonFullParams' : state}.`,
      {
        code: 'wrong-state',
        rank: this.#rank,
        expected: 'a call between training steps',
        actual: state === 'summoning' ? 'summoned' : state,
        fix: `call ${method} outside forward, backward and summonFullParams (after backward() returned).`,
      },
    );
  }

  beginForward(): void {
    if (this.#state === 'summoning') this.expectIdle('forward()');
    this.#forwardDepth += 1;
    if (this.#state === 'idle') this.#transition('idle', 'forward');
  }

  endForward(): void {
    this.#forwardDepth -= 1;
    if (this.#forwardDepth === 0 && this.#state === 'forward') this.#transition('forward', 'idle');
  }

  beginBackward(): void {
    if (this.#state === 'summoning') this.expectIdle('backward()');
    if (this.#state === 'backward') {
      throw new FsdpError('backward() was called while another backward of this model is running.', {
        code: 'wrong-state',
        rank: this.#rank,
        expected: 'one backward at a time',
        actual: 'a nested backward',
        fix: 'finish one backward before starting the next.',
      });
    }
    this.#transition(this.#state, 'backward');
  }

  endBackward(): void {
    this.#transition('backward', this.#forwardDepth > 0 ? 'forward' : 'idle');
  }

  beginSummon(): void {
    this.expectIdle('summonFullParams()');
    this.#transition('idle', 'summoning');
  }

  endSummon(): void {
    this.#transition('summoning', 'idle');
  }

  /** Runs `fn` with gradient reduction off (noSync); an async `fn` keeps it off until it settles. */
  withoutSync<T>(fn: () => T): T {
    if (this.#state === 'backward' || this.#state === 'summoning') this.expectIdle('noSync()');
    const previous = this.#syncGradients;
    this.#syncGradients = false;
    const restore = () => {
      this.#syncGradients = previous;
    };
    let result: T;
    try {
      result = fn();
    } catch (error) {
      restore();
      throw error;
    }
    if (result instanceof Promise) return result.finally(restore) as T;
    restore();
    return result;
  }

  #transition(from: TrainingState, to: TrainingState): void {
    if (this.#state !== from) {
      throw new FsdpError(`training state: expected '${from}' before '${to}', found '${this.#state}'.`, {
        code: 'wrong-state',
        rank: this.#rank,
        expected: from,
        actual: this.#state,
      });
    }
    this.#state = to;
  }
}

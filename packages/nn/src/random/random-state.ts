import type { Module } from '../module';

/**
 * [Note: random-state protocol]
 * A layer whose forward draws random numbers (Dropout, a noise layer) implements
 * `getRandomState()` / `setRandomState(state)`: a snapshot of everything its next draws depend on,
 * and its restoration. Whoever re-runs a forward (activation recomputation in FSDP) snapshots every
 * such layer before the first run, restores the snapshots for the re-run, and puts the current
 * states back afterwards, so the re-run draws the same numbers as the first run. The protocol is
 * structural: implementing the two methods is enough, whatever the layer's class.
 */
export interface RandomStateful<State = unknown> {
  /** The object's random state. */
  getRandomState(): State;
  /** Restores a state returned by `getRandomState`. */
  setRandomState(state: State): void;
}

/** True when the value has getRandomState and setRandomState. */
export function isRandomStateful(value: unknown): value is RandomStateful {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Partial<RandomStateful>;
  return typeof candidate.getRandomState === 'function' && typeof candidate.setRandomState === 'function';
}

/** `root` and its descendants that implement the random-state protocol, depth first. */
export function randomStatefulModules(root: Module): (Module & RandomStateful)[] {
  return root.modules().filter((module): module is Module & RandomStateful => isRandomStateful(module));
}

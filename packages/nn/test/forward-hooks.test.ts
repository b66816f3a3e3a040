import * as tf from '@tensorflow/tfjs-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { Dropout, isRandomStateful, Module, randomStatefulModules } from '../src/index';
import { useBackend } from './support/fixtures';
import { NoisyScale } from './support/noisy-scale';

class AddOne extends Module {
  calls = 0;
  forward(x: number): number {
    this.calls += 1;
    return x + 1;
  }
}

describe('forward hooks', () => {
  it('run pre hooks, wrappers (first registered outermost), forward, post hooks, in that order', () => {
    const module = new AddOne();
    const log: string[] = [];
    module.registerForwardPreHook((_, args) => {
      log.push(`pre ${args[0]}`);
      return [(args[0] as number) * 10];
    });
    module.registerForwardWrapper((next, args) => {
      log.push('outer in');
      const output = next(...args);
      log.push('outer out');
      return output;
    });
    module.registerForwardWrapper((next, args) => {
      log.push('inner in');
      return (next(...args) as number) * 2;
    });
    module.registerForwardHook((_, args, output) => {
      log.push(`post ${args[0]} ${output}`);
      return (output as number) + 0.5;
    });
    expect(module.forward(3)).toBe(62.5); // ((3 * 10) + 1) * 2 + 0.5
    expect(log).toEqual(['pre 3', 'outer in', 'inner in', 'outer out', 'post 30 62']);
    expect(module.calls).toBe(1);
  });

  it('hooks returning undefined change nothing; hooks attach to one instance only', () => {
    const hooked = new AddOne();
    const other = new AddOne();
    let seen = 0;
    hooked.registerForwardPreHook(() => {
      seen += 1;
    });
    hooked.registerForwardHook(() => undefined);
    expect(hooked.forward(1)).toBe(2);
    expect(other.forward(1)).toBe(2);
    expect(seen).toBe(1);
  });

  it('remove() detaches the hook (idempotently); the last removal restores the class forward', () => {
    const module = new AddOne();
    const first = module.registerForwardHook((_, __, output) => (output as number) * 100);
    const second = module.registerForwardWrapper((next, args) => next(...args));
    expect(Object.hasOwn(module, 'forward')).toBe(true);
    first.remove();
    first.remove();
    expect(module.forward(1)).toBe(2);
    second.remove();
    expect(Object.hasOwn(module, 'forward')).toBe(false);
    expect(module.forward).toBe(AddOne.prototype.forward);
  });
});

describe('random-state protocol', () => {
  beforeAll(() => useBackend('cpu'));

  it('Dropout and a layer of another class implement it; randomStatefulModules finds both', () => {
    class Model extends Module {
      readonly dropout = this.registerModule('dropout', new Dropout(0.5, { seed: 3 }));
      readonly noisy = this.registerModule('noisy', new NoisyScale(4, { seed: 4 }));
      forward(x: tf.Tensor): tf.Tensor {
        return this.noisy.forward(this.dropout.forward(x));
      }
    }
    const model = new Model();
    expect(isRandomStateful(model)).toBe(false);
    expect(randomStatefulModules(model)).toEqual([model.dropout, model.noisy]);
  });

  it('restoring the states replays the same draws', () => {
    const layers = [new Dropout(0.5, { seed: 3 }), new NoisyScale(6, { seed: 4 })];
    for (const layer of layers) {
      const x = tf.ones([2, 6]);
      const state = layer.getRandomState();
      const first = Array.from((layer.forward(x) as tf.Tensor).dataSync());
      const second = Array.from((layer.forward(x) as tf.Tensor).dataSync());
      expect(second).not.toEqual(first);
      layer.setRandomState(state);
      expect(Array.from((layer.forward(x) as tf.Tensor).dataSync())).toEqual(first);
    }
  });
});

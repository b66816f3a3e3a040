import type { ProcessGroup } from '@fsdp-ts/collectives';
import { FsdpError } from '@fsdp-ts/fsdp';
import { Module } from '@fsdp-ts/nn';
import { Parameter } from '@fsdp-ts/tensor';
import type * as tf from '@tensorflow/tfjs-core';
import { describe, expect, it } from 'vitest';
import { buildUnits } from '../src/internal/build-units';
import { resolveOptions } from '../src/options';

// buildUnits reads only the group's rank and size (no communication): a stand-in is enough.
const group = { rank: 0, size: 2 } as ProcessGroup;

class Holder extends Module {
  readonly weight: Parameter;
  constructor(weight: Parameter) {
    super();
    this.weight = this.registerParameter('weight', weight);
  }
  forward(input: tf.Tensor): tf.Tensor {
    return input;
  }
}

class Block extends Holder {}

class Model extends Module {
  readonly block: Block;
  readonly head: Holder;
  constructor(tied: boolean) {
    super();
    this.block = this.registerModule('block', new Block(Parameter.zeros([4])));
    this.head = this.registerModule('head', new Holder(tied ? this.block.weight : Parameter.zeros([4])));
  }
  forward(input: tf.Tensor): tf.Tensor {
    return this.head.forward(this.block.forward(input));
  }
}

describe('buildUnits', () => {
  it('rejects a Parameter tied between a unit and the root unit, naming both', () => {
    const options = resolveOptions({ group, autoWrapPolicy: [Block] });
    let caught: unknown;
    try {
      buildUnits(new Model(true), options);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(FsdpError);
    expect((caught as FsdpError).code).toBe('unsupported-model');
    expect((caught as FsdpError).message).toMatch(/shared by unit 'block' and unit '<root>'/);
  });

  it('puts untied parameters in their units, and a tie inside the root unit is fine', () => {
    const options = resolveOptions({ group, autoWrapPolicy: [Block] });
    const { units } = buildUnits(new Model(false), options);
    expect(
      units.map((unit) => unit.handles.flatMap((handle) => handle.layout.parameters.map((p) => p.names))),
    ).toEqual([[['head.weight']], [['block.weight']]]);
    const tiedInRoot = buildUnits(new Model(true), resolveOptions({ group }));
    expect(tiedInRoot.units).toHaveLength(1);
    expect(tiedInRoot.units[0]!.handles[0]!.parameters).toHaveLength(1);
  });
});

import { NnError } from '../errors';
import { Module } from '../module';

/** An ordered list of child modules named '0', '1', ... (PyTorch's nn.ModuleList). */
export class ModuleList<M extends Module = Module> extends Module {
  private readonly items: M[] = [];

  constructor(modules: Iterable<M> = []) {
    super();
    for (const module of modules) this.push(module);
  }

  /** Appends a module, registered under its index. */
  push(module: M): this {
    this.registerModule(String(this.items.length), module);
    this.items.push(module);
    return this;
  }

  /** The number of modules in the list. */
  get length(): number {
    return this.items.length;
  }

  /** The module at `index`; throws an NnError outside [0, length). */
  at(index: number): M {
    const module = this.items[index];
    if (module === undefined) {
      throw new NnError(`ModuleList: no module at index ${index}.`, {
        code: 'invalid-argument',
        expected: `an index in [0, ${this.items.length})`,
        actual: index,
        fix: 'check the index against list.length.',
      });
    }
    return module;
  }

  /** Iterates the modules in order. */
  [Symbol.iterator](): Iterator<M> {
    return this.items[Symbol.iterator]();
  }

  /** A list has no computation of its own: iterate it and call each module's forward. */
  forward(): never {
    throw new NnError('ModuleList has no forward.', {
      code: 'invalid-argument',
      expected: 'forward called on the modules of the list',
      actual: 'ModuleList.forward()',
      fix: 'loop over the list: for (const block of list) x = block.forward(x).',
    });
  }
}

import * as collectives from '@fsdp-ts/collectives';
import * as flatParam from '@fsdp-ts/flat-param';
import * as fsdp from '@fsdp-ts/fsdp';
import * as nn from '@fsdp-ts/nn';
import * as optim from '@fsdp-ts/optim';
import * as tensor from '@fsdp-ts/tensor';
import * as umbrella from 'fsdp-ts';
import { describe, expect, it } from 'vitest';

describe('fsdp-ts umbrella', () => {
  it('re-exports every public name of every package, as the same objects', () => {
    for (const [name, module] of Object.entries({ collectives, flatParam, fsdp, nn, optim, tensor })) {
      for (const [key, value] of Object.entries(module)) {
        expect((umbrella as Record<string, unknown>)[key], `${name}.${key}`).toBe(value);
      }
    }
  });
});

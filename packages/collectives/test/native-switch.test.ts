import { afterEach, describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/errors.js';
import { blasSetting } from '../src/internal/tcp/native-blas.js';
import { nativeSetting } from '../src/internal/tcp/native-sockets.js';

const variables = ['FSDP_TCP_NATIVE', 'FSDP_TCP_BLAS'] as const;
const saved = Object.fromEntries(variables.map((name) => [name, process.env[name]]));

afterEach(() => {
  for (const name of variables) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
});

describe.each([
  ['FSDP_TCP_NATIVE', nativeSetting],
  ['FSDP_TCP_BLAS', blasSetting],
] as const)('%s', (variable, read) => {
  it.each([
    [undefined, 'auto'],
    ['', 'auto'],
    ['0', 'off'],
    ['false', 'off'],
    ['1', 'required'],
    ['true', 'required'],
  ])('%j reads as %s', (value, expected) => {
    if (value === undefined) delete process.env[variable];
    else process.env[variable] = value;
    expect(read(3)).toBe(expected);
  });

  it('any other value is an invalid-argument error naming the variable, the value and the fix', () => {
    process.env[variable] = 'yes';
    let caught: unknown;
    try {
      read(3);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CollectiveError);
    const error = caught as CollectiveError;
    expect(error.code).toBe('invalid-argument');
    expect(error.rank).toBe(3);
    expect(error.message).toContain(`${variable} is 'yes'`);
    expect(error.actual).toBe('yes');
    expect(error.fix).toContain(`unset ${variable}`);
  });
});

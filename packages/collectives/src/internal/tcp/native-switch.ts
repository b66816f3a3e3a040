import { CollectiveError } from '../../errors.js';

/**
 * A native-path switch read from the environment: unset (or empty) for `auto` (use the native
 * piece when it loads), `0`/`false` for `off`, `1`/`true` for `required` (fail when it cannot
 * load). FSDP_TCP_NATIVE (the socket calls) and FSDP_TCP_BLAS (the OpenBLAS sums) read this way.
 */
export type NativeSwitch = 'auto' | 'off' | 'required';

/** Reads `variable`; any other value is an error naming it, with `fix` saying what each setting does. */
export function readNativeSwitch(variable: string, rank: number, fix: string): NativeSwitch {
  const value = process.env[variable];
  if (value === undefined || value === '') return 'auto';
  if (value === '0' || value === 'false') return 'off';
  if (value === '1' || value === 'true') return 'required';
  throw new CollectiveError(`${variable} is '${value}'; expected 1, 0 or unset.`, {
    code: 'invalid-argument',
    rank,
    expected: "'1', 'true', '0', 'false' or unset",
    actual: value,
    fix,
  });
}

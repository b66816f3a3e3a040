import { afterEach, describe, expect, it } from 'vitest';
import { CollectiveError } from '../src/errors.js';
import {
  formatEndpoint,
  localHostIdentity,
  localTransportSetting,
  parseEndpoint,
} from '../src/internal/tcp/tcp-connections.js';

const saved = process.env.FSDP_TCP_LOCAL;
afterEach(() => {
  if (saved === undefined) delete process.env.FSDP_TCP_LOCAL;
  else process.env.FSDP_TCP_LOCAL = saved;
});

describe('FSDP_TCP_LOCAL', () => {
  it.each([
    [undefined, 'unix'],
    ['', 'unix'],
    ['unix', 'unix'],
    ['tcp', 'tcp'],
  ])('%j reads as %s', (value, expected) => {
    if (value === undefined) delete process.env.FSDP_TCP_LOCAL;
    else process.env.FSDP_TCP_LOCAL = value;
    expect(localTransportSetting(2)).toBe(expected);
  });

  it('any other value is a typed error naming the variable, the value and the choices', () => {
    process.env.FSDP_TCP_LOCAL = 'TCP';
    const error = (() => {
      try {
        localTransportSetting(2);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(CollectiveError);
    expect(error).toMatchObject({ code: 'invalid-argument', rank: 2, actual: 'TCP' });
    expect((error as CollectiveError).message).toMatch(
      /FSDP_TCP_LOCAL is 'TCP'; expected unix, tcp or unset/,
    );
    expect((error as CollectiveError).fix).toMatch(/set it to tcp/);
  });
});

describe('data endpoints', () => {
  it('read back what they publish, with and without the local part', () => {
    const local = { name: 'fsdp-ts-00ff', identity: '6a1e2f4c-0000-4000-8000-123456789abc/4026531840' };
    expect(parseEndpoint(formatEndpoint('10.0.0.2:41000', local))).toEqual({
      host: '10.0.0.2',
      port: 41000,
      local,
    });
    // An older rank's plain host:port (and an IPv6 one) has no local part: reached over TCP.
    expect(parseEndpoint('10.0.0.2:41000')).toEqual({ host: '10.0.0.2', port: 41000 });
    expect(parseEndpoint(formatEndpoint('[::1]:5', undefined))).toEqual({ host: '::1', port: 5 });
  });

  it.runIf(process.platform === 'linux')('the host identity is the boot id and the network namespace', () => {
    expect(localHostIdentity()).toMatch(/^[0-9a-f-]{36}\/\d+$/);
  });
});

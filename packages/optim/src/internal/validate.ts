import { OptimError } from '../errors';

function invalid(where: string, key: string, expected: string, actual: unknown, fix: string): OptimError {
  return new OptimError(`${where}: invalid ${key} ${JSON.stringify(actual)}.`, {
    code: 'invalid-hyperparameter',
    expected,
    actual,
    fix,
  });
}

/** A finite number >= 0 (lr, eps, weightDecay, momentum, ...). */
export function checkNonNegative(where: string, key: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw invalid(where, key, 'a finite number >= 0', value, `pass ${key} as a non-negative number.`);
  }
}

/** A number in [0, 1) (a beta, a momentum, a dampening). */
export function checkUnitInterval(where: string, key: string, value: unknown): void {
  if (typeof value !== 'number' || !(value >= 0 && value < 1)) {
    throw invalid(where, key, 'a number in [0, 1)', value, `pass ${key} in [0, 1), e.g. 0.9.`);
  }
}

export function checkBetas(where: string, value: unknown): void {
  if (!Array.isArray(value) || value.length !== 2) {
    throw invalid(where, 'betas', 'a pair [beta1, beta2]', value, 'pass betas as [0.9, 0.999].');
  }
  checkUnitInterval(where, 'betas[0]', value[0]);
  checkUnitInterval(where, 'betas[1]', value[1]);
}

export function checkBoolean(where: string, key: string, value: unknown): void {
  if (typeof value !== 'boolean') {
    throw invalid(where, key, 'true or false', value, `pass ${key} as a boolean.`);
  }
}

/** Nesterov momentum needs momentum > 0 and dampening 0 (as in PyTorch). */
export function checkNesterov(where: string, nesterov: boolean, momentum: number, dampening: number): void {
  if (nesterov && (momentum <= 0 || dampening !== 0)) {
    throw invalid(
      where,
      'nesterov',
      'momentum > 0 and dampening 0 with nesterov',
      { nesterov, momentum, dampening },
      'set momentum > 0 and dampening 0, or nesterov false.',
    );
  }
}

/** tanh GELU's constants (see [Note: tanh GELU through sigmoid]): u = 2·√(2/π)·(x + 0.044715·x³). */
export const TWO_SQRT_2_OVER_PI = 2 * Math.sqrt(2 / Math.PI);
export const CUBIC = 0.044715;

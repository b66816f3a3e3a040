/**
 * Checks an internal invariant of @fsdp-ts/flat-param. A failure is a bug in fsdp-ts, not a user
 * error, so the message prints the values involved.
 */
export function assert(
  condition: unknown,
  message: string,
  values?: Record<string, unknown>,
): asserts condition {
  if (!condition) {
    const detail = values === undefined ? '' : ` ${JSON.stringify(values)}`;
    throw new Error(`fsdp-ts flat-param invariant broken: ${message}${detail}. Please report this.`);
  }
}

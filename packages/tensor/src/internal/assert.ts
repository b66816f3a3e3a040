/**
 * Checks an internal invariant. A failure is a bug in fsdp-ts, not a user error, so the message
 * prints the values involved to make the report actionable.
 */
export function assert(
  condition: unknown,
  message: string,
  values?: Record<string, unknown>,
): asserts condition {
  if (!condition) {
    const detail = values === undefined ? '' : ` ${JSON.stringify(values)}`;
    throw new Error(`fsdp-ts internal invariant broken: ${message}${detail}. Please report this.`);
  }
}

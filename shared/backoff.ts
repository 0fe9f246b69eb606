/**
 * Reconnect delay after `attempt` failures in a row (0 for the first retry):
 * capped exponential backoff with full jitter, uniform in
 * [0, min(capMs, baseMs·2^attempt)). Full jitter spreads a crowd of clients
 * that lost the same coordinator, so they do not all come back at once.
 */
export function backoffDelayMs(
  attempt: number,
  baseMs: number,
  capMs: number,
  random: () => number,
): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(Math.max(0, attempt), 30))
  return random() * ceiling
}

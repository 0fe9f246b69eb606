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

/**
 * The backoff's cap for an attempt: `refusedCapMs` (when lower) for one refused outright
 * (ECONNREFUSED: nothing listens, as while a coordinator restarts), which costs the coordinator
 * nothing, so the backoff only spreads the clients' return; `capMs` for any other.
 */
export function backoffCapFor(refused: boolean, capMs: number, refusedCapMs: number): number {
  return refused ? Math.min(capMs, refusedCapMs) : capMs
}

/**
 * Attempts the coordinator accepted and then left silent past their bound (a coordinator
 * there, but behind) double the next attempt's connect timeout, up to this many times.
 */
export const slowWelcomeGrowthMax = 8

/** The connect timeout of an attempt after `slowWelcomes` such attempts in a row. */
export function connectTimeoutFor(connectTimeoutMs: number, slowWelcomes: number): number {
  return connectTimeoutMs * Math.min(2 ** slowWelcomes, slowWelcomeGrowthMax)
}

import { systemClock } from '../../shared/index.js'

/** Real time, for tests against real processes (etcd, spawned replicas) that no manual clock drives. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => systemClock.setTimeout(resolve, ms))
}

/**
 * Polls `probe` until it returns something other than undefined, or fails
 * after `timeoutMs` naming what it waited for. An upper bound for an event,
 * never a measurement: assertions about time belong in bench/.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<T> {
  const deadline = systemClock.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (systemClock.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await delay(everyMs)
  }
}

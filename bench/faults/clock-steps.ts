import type { WindowedFaults } from './windowed.js'

/**
 * The stepped-clock variants of the quota scenarios (#39.2): 10 s windows,
 * two of them measured; the coordinator's wall clock stepped ±30 s across a
 * SIGKILL and restart 2.5 s into the first window, or live (no restart):
 * +30 s 2.5 s into the first window, then −30 s 2.5 s into the second. No
 * client is killed.
 */
const base = {
  windowMs: 10_000,
  windows: 2,
  clientKillMs: undefined,
  coordinatorKillMs: 2500,
  restartAfterMs: 500,
} as const

export const clockStepVariants = {
  'restart, +30 s': { ...base, restartWallOffsetSec: 30 },
  'restart, −30 s': { ...base, restartWallOffsetSec: -30 },
  'live, +30 s then −30 s': {
    ...base,
    coordinatorKillMs: undefined,
    liveSteps: [
      { atMs: 2500, offsetSec: 30 },
      { atMs: 12_500, offsetSec: -30 },
    ],
  },
} as const satisfies Record<string, Partial<WindowedFaults>>

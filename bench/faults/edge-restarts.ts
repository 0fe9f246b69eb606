import type { WindowedFaults } from './windowed.js'

/**
 * A named quota's coordinator SIGKILLed in a window's last 100 ms: after the leases renewed
 * 100 ms before the edge carried each process's block of the next window (server/pool/ahead.ts),
 * so the processes hold blocks of two windows and the ledger keeps both (`LedgerEntry.ahead`).
 * Restarted after the edge: from its ledger; from a damaged one (it learns); with its wall clock
 * stepped back 30 s (its windows trail the processes' clocks). 10 s windows, two measured; the
 * kill 50 ms before the first window's edge, the restart 300 ms later. No client is killed.
 */
const base = {
  windowMs: 10_000,
  windows: 2,
  clientKillMs: undefined,
  coordinatorKillMs: 9950,
  restartAfterMs: 300,
} as const

export const edgeRestartVariants = {
  'from its ledger': base,
  'its ledger damaged (half)': { ...base, ledgerDamage: 'half' },
  'its wall clock −30 s': { ...base, restartWallOffsetSec: -30 },
} as const satisfies Record<string, Partial<WindowedFaults>>

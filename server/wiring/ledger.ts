import type { Logger } from 'pino'
import { SluiceError } from '../../shared/index.js'
import type { Coordinator } from '../coordinator/index.js'
import { FileLedger, type Ledger, type LedgerEntry } from '../ledger/index.js'

/**
 * Opens the embedded file ledger in `dataDir` and attaches it: the
 * coordinator resumes from what it holds, or learns when it cannot be
 * trusted. A directory another coordinator holds, or one that cannot be
 * used, is a start that fails, never a silent run without a ledger.
 */
export async function openFileLedger(
  dataDir: string,
  coordinator: Coordinator,
  logger: Logger,
): Promise<Ledger> {
  const ledger = new FileLedger(dataDir)
  let restored: LedgerEntry[] | undefined
  try {
    restored = await ledger.load()
    if (ledger.fresh) {
      const learn = coordinator.config.server.freshLedger === 'learn'
      if (learn) restored = undefined
      logger.info(
        { dataDir, ledger: ledger.id },
        learn
          ? 'a new ledger (server.freshLedger: learn): learning once'
          : 'a new ledger: nothing can be outstanding, serving at once',
      )
    } else if (restored === undefined)
      logger.warn(
        { dataDir },
        'the data directory holds files but no ledger (lost?): learning as without one',
      )
  } catch (error) {
    if (
      error instanceof SluiceError &&
      (error.code === 'SLUICE_ERR_LEDGER_LOCKED' || error.code === 'SLUICE_ERR_LEDGER_DIR')
    )
      throw error
    // Never trust what cannot be read: learn instead, and say why.
    logger.error({ err: error }, 'the ledger cannot be trusted; learning instead')
    coordinator.metrics.errors.inc({ code: 'SLUICE_ERR_LEDGER_CORRUPT' })
  }
  coordinator.attachLedger(ledger, restored)
  return ledger
}

export { FileLedger } from './file.js'
export { MemoryLedger } from './memory.js'
export {
  applyChanges,
  entryKey,
  restoredUntilFor,
  restoredUntilMs,
  writtenBeforeLast,
} from './types.js'
export type { Ledger, LedgerChange, LedgerCommitment, LedgerEntry, LedgerStamp } from './types.js'

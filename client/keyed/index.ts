export { KeyedFamily } from './family.js'
export { KeyView } from './key-view.js'
export type {
  KeyLease,
  KeyReport,
  KeySpent,
  KeyedEvents,
  KeyedOptions,
  KeyedOwner,
} from './types.js'

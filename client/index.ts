// The client library lands with its own issue; until then it offers the shared clock.
export type { Clock, Timer } from '../shared/index.js'
export { ManualClock, systemClock } from '../shared/index.js'

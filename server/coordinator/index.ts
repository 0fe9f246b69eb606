export { Coordinator } from './coordinator.js'
export type { Role } from './coordinator.js'
export type { SessionPort } from './session-port.js'

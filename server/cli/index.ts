export { runCli, usage } from './main.js'
export type { CommandIo } from './io.js'

export { buildHttpApp } from './app.js'
export type { HttpOptions } from './app.js'
export type { ClientDetail, ResourceSummary } from './status.js'

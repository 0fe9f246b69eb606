export { adminRoutes } from './admin.js'
export { healthRoutes } from './health.js'
export { statusRoutes } from './status.js'

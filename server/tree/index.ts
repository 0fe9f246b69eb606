export { Upstream } from './upstream.js'
export type { UpstreamCapacity, UpstreamHooks, UpstreamOptions } from './upstream.js'

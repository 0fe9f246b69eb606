import { isFamilyKey, isFamilyShare, type ResourceSettings } from '../../config/index.js'
import { familyShareShape } from './family-share.js'
import { hotKeyShape } from './hot-key.js'
import { keyedQuotaShareShape } from './keyed-quota-share.js'
import { namedQuotaShape } from './named-quota.js'
import { plainShape } from './plain.js'
import { quotaKeyShape } from './quota-key.js'
import type { Shape } from './shape.js'

export type { Shape } from './shape.js'
export { quotaBlocks, quotaStandingBlock } from './named-quota.js'
export { centralClientId } from './default-holders.js'

/**
 * The shape of a resource with these settings: by whether it has a window (a
 * quota), and whether it is a keyed family's own resource, one of its keys,
 * or neither. The one place that tells them apart.
 */
export function shapeOf(s: ResourceSettings): Shape {
  const windowed = s.quotaWindow !== undefined
  if (isFamilyShare(s)) return windowed ? keyedQuotaShareShape : familyShareShape
  if (isFamilyKey(s)) return windowed ? quotaKeyShape : hotKeyShape
  return windowed ? namedQuotaShape : plainShape
}

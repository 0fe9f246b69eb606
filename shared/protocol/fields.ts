import { z } from 'zod'
import { domainLimits as L } from '../domain.js'

/**
 * The field schemas every edge shares: the protocol's messages, the
 * coordinator's config and the client's options each validate a quantity,
 * a weight or an id with these, so one bound is written once.
 */

// Control characters (C0, DEL, C1) are what "printable" excludes.
// eslint-disable-next-line no-control-regex
const printable = /^[^\u0000-\u001f\u007f-\u009f]+$/u

/** A string of printable characters only (no control characters). */
export function printableString(maxLength: number): z.ZodString {
  return z.string().min(1).max(maxLength).regex(printable, 'must hold printable characters only')
}

/** A resource id: 1–1024 printable characters, `/` included; no control characters. */
export const resourceId = printableString(L.maxIdLength)

/** A client id: 1–256 printable characters (`domainLimits.maxClientIdLength`). */
export const clientIdSchema = printableString(L.maxClientIdLength)

/** A capacity, demand, burst or cap, in the resource's unit: 0 to `maxQuantity`. */
export const quantitySchema = z.number().min(0).max(L.maxQuantity)

/** A client or tenant weight: `minWeight` to `maxWeight`. */
export const weightSchema = z.number().min(L.minWeight).max(L.maxWeight)

/** A priority band: an integer within ±`maxPriority`. */
export const prioritySchema = z.number().int().min(-L.maxPriority).max(L.maxPriority)

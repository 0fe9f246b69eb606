export { decodeClientMessage, decodeServerMessage, encodeMessage } from './codec.js'
export type { Decoded } from './codec.js'
export * from './messages.js'
export {
  clientIdSchema,
  printableString,
  prioritySchema,
  quantitySchema,
  weightSchema,
} from './fields.js'

import type { z } from 'zod'
import { describeIssues } from '../issues.js'
import { acceptHotMessage, acceptHotServerMessage } from './hot-path.js'
import { clientMessage, serverMessage, type ClientMessage, type ServerMessage } from './messages.js'

export type Decoded<T> =
  | { readonly ok: true; readonly message: T }
  | { readonly ok: false; readonly code: 'SLUICE_ERR_PROTO_MALFORMED'; readonly detail: string }

function decodeWith<T>(
  schema: z.ZodType<T>,
  data: string,
  accept?: (json: unknown) => T | undefined,
): Decoded<T> {
  let json: unknown
  try {
    json = JSON.parse(data)
  } catch {
    return { ok: false, code: 'SLUICE_ERR_PROTO_MALFORMED', detail: 'frame is not JSON' }
  }
  const hot = accept?.(json)
  if (hot !== undefined) return { ok: true, message: hot }
  const result = schema.safeParse(json)
  if (!result.success)
    return { ok: false, code: 'SLUICE_ERR_PROTO_MALFORMED', detail: describeIssues(result.error) }
  return { ok: true, message: result.data }
}

/** The one gate every frame from a client passes: a typed message, or an error code and detail. */
export function decodeClientMessage(data: string): Decoded<ClientMessage> {
  // Demand, ack and decide frames that pass the hot-path check skip zod; anything else is zod's.
  return decodeWith(clientMessage, data, acceptHotMessage)
}

/** The one gate every frame from a coordinator passes. */
export function decodeServerMessage(data: string): Decoded<ServerMessage> {
  // Decided frames that pass the hot-path check skip zod.
  return decodeWith(serverMessage, data, acceptHotServerMessage)
}

export function encodeMessage(message: ClientMessage | ServerMessage): string {
  return JSON.stringify(message)
}

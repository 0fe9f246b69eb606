/**
 * The one catalogue of error codes. Every failure Sluice reports carries one
 * of these codes; `docs/errors.md` lists the same codes (a test keeps the two
 * equal in both directions). Wire errors also carry the WebSocket close code
 * (4xxx) they cause. Expected outcomes ("no tokens") are return values, never
 * errors.
 */

export interface ErrorSpec {
  /** One-line meaning; the thrown message adds the specifics (field, rule, value). */
  readonly message: string
  /** Whether trying the same thing again later may succeed. */
  readonly retryable: boolean
  /** The WebSocket close code this error causes when it ends a connection. */
  readonly closeCode?: number
}

export const errorCatalogue = Object.freeze({
  // allocation engine
  SLUICE_ERR_ALLOC_INVALID_INPUT: {
    message: 'allocation input is malformed',
    retryable: false,
  },
  SLUICE_ERR_ALLOC_INVALID_NUMBER: {
    message: 'allocation input has a number out of range',
    retryable: false,
  },
  SLUICE_ERR_ALLOC_DUPLICATE_CLIENT: {
    message: 'two clients of one allocation share an id',
    retryable: false,
  },
  SLUICE_ERR_ALLOC_UNKNOWN_ALGORITHM: {
    message: 'unknown allocation algorithm',
    retryable: false,
  },
  SLUICE_ERR_ALLOC_UNKNOWN_TENANT: {
    message: 'a client names a tenant that is not defined',
    retryable: false,
  },
  // configuration
  SLUICE_ERR_CONFIG_INVALID: {
    message: 'configuration is not valid',
    retryable: false,
  },
  SLUICE_ERR_CONFIG_READ: {
    message: 'configuration file cannot be read',
    retryable: false,
  },
  SLUICE_ERR_CONFIG_DOWNGRADE: {
    message: 'the new configuration lowers security; set server.securityDowngrade to allow it',
    retryable: false,
  },
  // ledger of commitments
  SLUICE_ERR_LEDGER_CORRUPT: {
    message:
      'the ledger cannot be trusted (unreadable, or a line fails its checksum); the coordinator learns instead',
    retryable: false,
  },
  SLUICE_ERR_LEDGER_LOCKED: {
    message: 'the data directory is in use by another running coordinator',
    retryable: true,
  },
  SLUICE_ERR_LEDGER_DIR: {
    message: 'the data directory cannot be used',
    retryable: false,
  },
  SLUICE_ERR_LEDGER_WRITE: {
    message: 'writing the ledger failed; the leases it covers were not sent',
    retryable: true,
  },
  // wire protocol (each ends the connection with its close code)
  SLUICE_ERR_PROTO_MALFORMED: {
    message: 'message is not valid JSON of a known type and shape',
    retryable: false,
    closeCode: 4400,
  },
  SLUICE_ERR_PROTO_UNEXPECTED: {
    message: 'message out of order: hello must come first, and once',
    retryable: false,
    closeCode: 4402,
  },
  SLUICE_ERR_PROTO_VERSION: {
    message: 'protocol version not supported',
    retryable: false,
    closeCode: 4406,
  },
  SLUICE_ERR_PROTO_HELLO_TIMEOUT: {
    message: 'no hello within the time allowed',
    retryable: true,
    closeCode: 4408,
  },
  SLUICE_ERR_PROTO_FRAME_TOO_LARGE: {
    message: 'frame larger than the coordinator accepts',
    retryable: false,
    closeCode: 4413,
  },
  SLUICE_ERR_PROTO_RATE_LIMITED: {
    message: 'connection (or its tenant) sent messages or entries faster than allowed',
    retryable: true,
    closeCode: 4429,
  },
  SLUICE_ERR_AUTH_INVALID_TOKEN: {
    message: 'tenant token missing or not recognised',
    retryable: false,
    closeCode: 4401,
  },
  SLUICE_ERR_AUTH_RATE_LIMITED: {
    message: 'too many failed authentications from this address; try again later',
    retryable: true,
    closeCode: 4430,
  },
  SLUICE_ERR_SESSION_REPLACED: {
    message: 'another connection with the same client id took over',
    retryable: false,
    closeCode: 4409,
  },
  SLUICE_ERR_SESSION_DEAD: {
    message: 'peer missed its heartbeat',
    retryable: true,
    closeCode: 4410,
  },
  SLUICE_ERR_SESSION_SLOW_READER: {
    message: 'the peer stopped reading: what waits to be sent to it passed the bound',
    retryable: true,
    closeCode: 4411,
  },
  SLUICE_ERR_LIMIT_CLIENTS: {
    message: 'too many clients, in total or for this tenant',
    retryable: true,
    closeCode: 4503,
  },
  SLUICE_ERR_SERVER_SHUTDOWN: {
    message: 'coordinator is shutting down',
    retryable: true,
    closeCode: 4501,
  },
  SLUICE_ERR_NOT_LEADER: {
    message: 'this replica is not the leader; the redirect names the leader',
    retryable: true,
    closeCode: 4421,
  },
  SLUICE_ERR_NO_LEADER: {
    message: 'no leader is known yet; retry after a backoff',
    retryable: true,
    closeCode: 4502,
  },
  SLUICE_ERR_SERVER_LISTEN: {
    message: 'the coordinator cannot listen on its address',
    retryable: false,
  },
  SLUICE_ERR_SERVER_INTERNAL: {
    message: 'coordinator failed unexpectedly; the cause is in its log',
    retryable: true,
    closeCode: 4500, // internalCloseCode
  },
  // per-resource replies (an error message; the connection stays open)
  SLUICE_ERR_RESOURCE_UNKNOWN: {
    message: 'no resource template matches this id',
    retryable: false,
  },
  SLUICE_ERR_RESOURCE_FORBIDDEN: {
    message: 'this tenant may not use this resource',
    retryable: false,
  },
  SLUICE_ERR_RESOURCE_KEYED: {
    message: 'a key of a keyed family, asked for as a resource of its own',
    retryable: false,
  },
  SLUICE_ERR_AUTH_PRIORITY: {
    message: "priority outside the tenant's allowed range",
    retryable: false,
  },
  SLUICE_ERR_RESOURCE_INVALID: {
    message: 'resource id or demand is not valid',
    retryable: false,
  },
  SLUICE_ERR_KEY_INVALID: {
    message:
      'a key of a keyed family must be 1–256 printable characters, and not *: it was refused, never reported',
    retryable: false,
  },
  SLUICE_ERR_REPORT_INVALID: {
    message:
      'a report says more of a quota was used than the client was ever leased of it: counted as what it was leased',
    retryable: false,
  },
  SLUICE_ERR_LIMIT_RESOURCES: {
    message: 'too many resources, for this client or for the coordinator',
    retryable: true,
  },
  // HTTP API
  SLUICE_ERR_HTTP_UNAUTHORIZED: {
    message: 'token missing or wrong for this route',
    retryable: false,
  },
  SLUICE_ERR_HTTP_NOT_FOUND: {
    message: 'no such route or resource',
    retryable: false,
  },
  SLUICE_ERR_HTTP_BAD_REQUEST: {
    message: 'request is not valid',
    retryable: false,
  },
  SLUICE_ERR_HTTP_NO_KEY: {
    message: 'the request carries no key to limit it by',
    retryable: false,
  },
  SLUICE_ERR_HTTP_RATE_LIMITED: {
    message: 'rate limit exceeded',
    retryable: true,
  },
  SLUICE_ERR_HTTP_UNREACHABLE: {
    message: 'coordinator did not answer',
    retryable: true,
  },
  SLUICE_ERR_HTTP_KEY_NOT_RESET: {
    message: 'the key cannot be reset now',
    retryable: true,
  },
  SLUICE_ERR_HTTP_TRUST_PROXY: {
    message: 'requests come through a proxy the framework does not trust: callers share a key',
    retryable: false,
  },
  // client library
  SLUICE_ERR_CLIENT_CLOSED: {
    message: 'client or resource is closed',
    retryable: false,
  },
  SLUICE_ERR_CLIENT_UNREACHABLE: {
    message: 'the coordinator cannot be reached; the client retries with backoff',
    retryable: true,
  },
  SLUICE_ERR_CLIENT_BAD_URL: {
    message: 'no Sluice coordinator at this URL',
    retryable: false,
  },
  SLUICE_ERR_CLIENT_REDIRECT: {
    message: 'a redirect was not followed: it changed the scheme or left the configured hosts',
    retryable: true,
  },
  SLUICE_ERR_CLIENT_ABORTED: {
    message: 'acquire was aborted by its signal',
    retryable: false,
  },
  SLUICE_ERR_CLIENT_TIMEOUT: {
    message: 'waited longer than allowed (maxWaitMs of acquire, timeoutMs of ready)',
    retryable: true,
  },
  SLUICE_ERR_CLIENT_QUEUE_FULL: {
    message: 'too many callers already wait in acquire',
    retryable: true,
  },
  SLUICE_ERR_CLIENT_THROTTLED: {
    message: 'request rejected locally by adaptive throttling',
    retryable: true,
  },
  SLUICE_ERR_LIMITER_COST_TOO_HIGH: {
    message: 'cost can never be admitted by this limiter (above its burst or limit)',
    retryable: false,
  },
  // command line
  SLUICE_ERR_CLI_USAGE: {
    message: 'command line is not understood',
    retryable: false,
  },
  SLUICE_ERR_CLI_INPUT: {
    message: 'command input is not valid',
    retryable: false,
  },
  // options passed to a constructor or factory
  SLUICE_ERR_OPTION_INVALID: {
    message: 'an option is not valid',
    retryable: false,
  },
} as const satisfies Record<string, ErrorSpec>)

export type ErrorCode = keyof typeof errorCatalogue

/** Every code of the catalogue, for schemas that carry one. */
export const errorCodes = Object.freeze(Object.keys(errorCatalogue)) as readonly [
  ErrorCode,
  ...ErrorCode[],
]

/** The one way a coded failure reads: the catalogue line, then the specifics when there are any. */
export function formatError(code: ErrorCode, detail = ''): string {
  const spec: ErrorSpec = errorCatalogue[code]
  return detail === '' ? spec.message : `${spec.message}: ${detail}`
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(errorCatalogue, value)
}

/**
 * The close code of an internal failure, and of any code that names none:
 * a connection ended for such a reason says only "internal".
 */
export const internalCloseCode = 4500

/** The WebSocket close code an error ends a connection with; `internalCloseCode` for codes that name none. */
export function closeCodeOf(code: ErrorCode): number {
  return (errorCatalogue[code] as ErrorSpec).closeCode ?? internalCloseCode
}

const codesByClose = new Map<number, ErrorCode>()
for (const code of errorCodes) {
  const close = (errorCatalogue[code] as ErrorSpec).closeCode
  if (close !== undefined) codesByClose.set(close, code)
}

/** The error code behind a 4xxx close code, when it is one of ours. */
export function codeOfClose(closeCode: number): ErrorCode | undefined {
  return codesByClose.get(closeCode)
}

/** The error class for every coded failure. `message` is the catalogue line plus the detail. */
export class SluiceError extends Error {
  readonly code: ErrorCode
  readonly retryable: boolean
  readonly closeCode: number | undefined
  readonly detail: string
  /** The resource the error is about, when it is about one. */
  readonly resource: string | undefined

  constructor(
    code: ErrorCode,
    detail = '',
    options?: { cause?: unknown; resource?: string | undefined },
  ) {
    const spec: ErrorSpec = errorCatalogue[code]
    super(formatError(code, detail), options)
    this.name = 'SluiceError'
    this.code = code
    this.retryable = spec.retryable
    this.closeCode = spec.closeCode
    this.detail = detail
    this.resource = options?.resource
  }

  /** An error as it arrived from the coordinator: its message is `formatError(code, detail)`. */
  static fromWire(code: ErrorCode, message: string, resource?: string): SluiceError {
    const prefix = `${errorCatalogue[code].message}: `
    const detail = message.startsWith(prefix)
      ? message.slice(prefix.length)
      : message === errorCatalogue[code].message
        ? ''
        : message
    return new SluiceError(code, detail, { resource })
  }
}

/** Formats a received value for an error message: short, and never throws. */
export function describeValue(value: unknown): string {
  if (typeof value === 'number') return Number.isNaN(value) ? 'NaN' : String(value)
  if (typeof value === 'string')
    return JSON.stringify(value.length > 64 ? `${value.slice(0, 64)}…` : value)
  if (value === undefined) return 'undefined'
  try {
    const text = JSON.stringify(value)
    return text.length > 64 ? `${text.slice(0, 64)}…` : text
  } catch {
    return Object.prototype.toString.call(value)
  }
}

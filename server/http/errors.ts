import { errorCatalogue, formatError, type ErrorCode } from '../../shared/index.js'

/** The body of every HTTP error: the code, its message, and whether to retry. */
export function errorBody(
  code: ErrorCode,
  detail = '',
): { error: { code: ErrorCode; message: string; retryable: boolean } } {
  return {
    error: { code, message: formatError(code, detail), retryable: errorCatalogue[code].retryable },
  }
}

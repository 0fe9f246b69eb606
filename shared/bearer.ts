/** The `Authorization` header value that carries a token (RFC 6750). */
export function bearerHeader(token: string): string {
  return `Bearer ${token}`
}

/** The token of an `Authorization: Bearer …` header; undefined when there is none. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  return /^Bearer\s+(.+)$/i.exec(header)?.[1]
}

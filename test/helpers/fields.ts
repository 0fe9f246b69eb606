/** `limit=100, remaining=99, reset=60` (a draft-7 RateLimit field) → { limit: 100, remaining: 99, reset: 60 }. */
export function dictionary(field: string | null): Record<string, number> {
  const out: Record<string, number> = {}
  for (const part of (field ?? '').split(',')) {
    const [k, v] = part.trim().split('=')
    if (k !== undefined && v !== undefined) out[k] = Number(v)
  }
  return out
}

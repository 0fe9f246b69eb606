import { SluiceError, systemClock } from '../../../shared/index.js'
import type { ClientDetail, ResourceSummary } from '../../http/index.js'

/** The samples `sluice top` keeps per resource: enough for the widest sparkline. */
export const keptSamples = 300
/** Resources whose history is fetched (the first ones listed). */
const maxHistories = 100
const requestTimeoutMs = 5_000

export interface Samples {
  t: number[]
  capacity: number[]
  admitted: number[]
  refused: number[]
  inFlight: number[]
}

export type ResourceDetailBody = ResourceSummary & { clientDetails: ClientDetail[] }

/** Everything one screen shows, as last fetched. */
export interface TopData {
  readonly url: string
  role: string
  leader: string | null
  learning: string[]
  resources: ResourceSummary[]
  readonly history: Map<string, Samples>
  /** The selected resource and its clients (in the clients view). */
  detail: ResourceDetailBody | undefined
  /** Why the last refresh failed (the screen keeps the data before it). */
  error: string | undefined
  /** Wall-clock ms of the last good refresh. */
  updatedAtMs: number | undefined
}

type Fetch = typeof fetch

/** Reads the coordinator's status API for `sluice top`, keeping each resource's recent history. */
export class TopFeed {
  readonly data: TopData
  readonly #headers: Record<string, string>
  readonly #fetch: Fetch

  constructor(url: string, token: string | undefined, fetchImpl: Fetch = fetch) {
    this.data = {
      url,
      role: 'connecting',
      leader: null,
      learning: [],
      resources: [],
      history: new Map(),
      detail: undefined,
      error: undefined,
      updatedAtMs: undefined,
    }
    this.#headers = token === undefined ? {} : { authorization: `Bearer ${token}` }
    this.#fetch = fetchImpl
  }

  async #get(path: string, okStatuses: readonly number[] = [200]): Promise<Response> {
    const abort = new AbortController()
    const timer = systemClock.setTimeout(() => abort.abort(), requestTimeoutMs)
    try {
      const res = await this.#fetch(`${this.data.url}${path}`, {
        headers: this.#headers,
        signal: abort.signal,
      })
      if (res.status === 401)
        throw new SluiceError(
          'SLUICE_ERR_HTTP_UNAUTHORIZED',
          `${this.data.url}: reads need a token: --token (a read, admin or tenant token) or SLUICE_TOKEN`,
        )
      if (!okStatuses.includes(res.status)) throw new Error(`${path}: HTTP ${res.status}`)
      return res
    } finally {
      timer.cancel()
    }
  }

  /**
   * One refresh: readiness, the resource list, new history samples, and the
   * detail of `detailId` when given. A failure is kept in `data.error` (and
   * the last good data stays); a missing token throws.
   */
  async refresh(detailId: string | undefined, nowMs: number): Promise<void> {
    const d = this.data
    try {
      const ready = (await (await this.#get('/readyz', [200, 503])).json()) as {
        role?: string
        leader?: string | null
        learning?: string[]
      }
      d.role = ready.role ?? 'unknown'
      d.leader = ready.leader ?? null
      d.learning = ready.learning ?? []
      const list = (await (await this.#get('/v1/resources')).json()) as {
        resources: ResourceSummary[]
      }
      d.resources = list.resources
      const withClients = d.resources.filter((r) => r.clients > 0).slice(0, maxHistories)
      await Promise.all(withClients.map((r) => this.#history(r.id)))
      for (const id of d.history.keys())
        if (!withClients.some((r) => r.id === id)) d.history.delete(id)
      if (detailId === undefined) d.detail = undefined
      else {
        const res = await this.#get(`/v1/resources/${encodeURIComponent(detailId)}`, [200, 404])
        d.detail = res.status === 404 ? undefined : ((await res.json()) as ResourceDetailBody)
      }
      d.error = undefined
      d.updatedAtMs = nowMs
    } catch (error) {
      if (error instanceof SluiceError) throw error
      d.error = `cannot reach ${d.url}: ${(error as Error).message}`
    }
  }

  async #history(id: string): Promise<void> {
    let held = this.data.history.get(id)
    if (held === undefined) {
      held = { t: [], capacity: [], admitted: [], refused: [], inFlight: [] }
      this.data.history.set(id, held)
    }
    const last = held.t.at(-1)
    const query = last === undefined ? 'range=5m' : `range=5m&from=${last + 1}`
    const res = await this.#get(
      `/v1/resources/${encodeURIComponent(id)}/history?${query}`,
      [200, 404],
    )
    if (res.status === 404) return
    const h = (await res.json()) as Samples
    for (const k of ['t', 'capacity', 'admitted', 'refused', 'inFlight'] as const) {
      held[k].push(...h[k])
      if (held[k].length > keptSamples) held[k].splice(0, held[k].length - keptSamples)
    }
  }
}

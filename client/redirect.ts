/**
 * Whether a redirect from `fromUrl` to `toUrl` may be followed: never to
 * another scheme (a `wss://` connection is not sent to `ws://`, where the
 * tenant token would travel in clear), and never to a host outside
 * `allowedHosts` (the hosts of the configured URLs, and those the user
 * added), unless every host is allowed. Returns why not, or undefined.
 */
export function redirectRefusal(
  fromUrl: string,
  toUrl: string,
  allowedHosts: ReadonlySet<string> | 'any',
): string | undefined {
  let from: URL
  let to: URL
  try {
    from = new URL(fromUrl)
    to = new URL(toUrl)
  } catch {
    return `${JSON.stringify(toUrl)} is not a URL`
  }
  if (to.protocol !== from.protocol)
    return `${toUrl}: a redirect may not change the scheme (${from.protocol} to ${to.protocol})`
  if (allowedHosts !== 'any' && !allowedHosts.has(to.hostname.toLowerCase()))
    return `${toUrl}: ${to.hostname} is not a host of the configured URLs; add it to redirectHosts to allow it`
  return undefined
}

/** The hosts a client may be redirected to: those of its URLs, and `extra`. */
export function redirectHosts(
  urls: readonly string[],
  extra: readonly string[] | 'any' | undefined,
): ReadonlySet<string> | 'any' {
  if (extra === 'any') return 'any'
  const hosts = new Set<string>()
  for (const url of urls) {
    try {
      hosts.add(new URL(url).hostname.toLowerCase())
    } catch {
      // The options' check refuses a URL that does not parse.
    }
  }
  for (const host of extra ?? []) hosts.add(host.toLowerCase())
  return hosts
}

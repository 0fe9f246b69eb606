import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** A throwaway CA and certificates signed by it, made with openssl at test time; nothing private is committed. */
export interface TestPki {
  readonly dir: string
  /** Paths of the PEM files. */
  readonly caFile: string
  readonly certFile: string
  readonly keyFile: string
  readonly clientCertFile: string
  readonly clientKeyFile: string
  /** The same, read. */
  readonly ca: string
  readonly clientCert: string
  readonly clientKey: string
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' })
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, all EC P-256, valid a day. */
export function makePki(name = 'sluice-test'): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-pki-'))
  const key = (file: string): string[] => [
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:prime256v1',
    '-nodes',
    '-keyout',
    file,
  ]
  openssl(dir, [
    'req',
    '-x509',
    ...key('ca.key'),
    '-out',
    'ca.crt',
    '-days',
    '1',
    '-subj',
    `/CN=${name}-ca`,
  ])
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  openssl(dir, ['req', ...key('server.key'), '-out', 'server.csr', '-subj', '/CN=127.0.0.1'])
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.crt',
    '-days',
    '1',
    '-extfile',
    'server.ext',
  ])
  openssl(dir, ['req', ...key('client.key'), '-out', 'client.csr', '-subj', `/CN=${name}-client`])
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    'client.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'client.crt',
    '-days',
    '1',
  ])
  const path = (f: string): string => join(dir, f)
  return {
    dir,
    caFile: path('ca.crt'),
    certFile: path('server.crt'),
    keyFile: path('server.key'),
    clientCertFile: path('client.crt'),
    clientKeyFile: path('client.key'),
    ca: readFileSync(path('ca.crt'), 'utf8'),
    clientCert: readFileSync(path('client.crt'), 'utf8'),
    clientKey: readFileSync(path('client.key'), 'utf8'),
  }
}

import { readFile } from 'node:fs/promises'
import { SluiceError } from '../../shared/index.js'
import type { TlsConfig } from './schema.js'

/** What an HTTPS server needs, read from the files `server.tls` names. */
export interface TlsMaterial {
  readonly key: Buffer
  readonly cert: Buffer
  readonly ca: Buffer | undefined
  /** Client certificates signed by `ca` are required. */
  readonly requestCert: boolean
}

async function read(path: string, field: string): Promise<Buffer> {
  try {
    return await readFile(path)
  } catch (error) {
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_READ',
      `server.tls.${field}: ${(error as Error).message}`,
      {
        cause: error,
      },
    )
  }
}

/** Reads the certificate, key and CA files of `server.tls`; errors name the field. */
export async function loadTls(tls: TlsConfig): Promise<TlsMaterial> {
  if (tls.clientCerts === 'require' && tls.caFile === undefined)
    throw new SluiceError(
      'SLUICE_ERR_CONFIG_INVALID',
      'server.tls.caFile: needed with clientCerts: require (client certificates are checked against it)',
    )
  return {
    key: await read(tls.keyFile, 'keyFile'),
    cert: await read(tls.certFile, 'certFile'),
    ca: tls.caFile === undefined ? undefined : await read(tls.caFile, 'caFile'),
    requestCert: tls.clientCerts === 'require',
  }
}

import { describe, expect, it } from 'vitest'
import { runCli } from '../../../server/cli/main.js'

async function run(
  argv: string[],
  stdin = '',
): Promise<{ status: number; stdout: string; stderr: string }> {
  let stdout = ''
  let stderr = ''
  const status = await runCli(argv, {
    stdin: [stdin],
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
  })
  return { status, stdout, stderr }
}

describe('sluice allocate', () => {
  it('prints the grants of a scenario read from stdin', async () => {
    const scenario = {
      capacity: 120,
      surplus: 'hold',
      clients: [
        { id: 'a', wants: 1000 },
        { id: 'b', wants: 50 },
        { id: 'c', wants: 10 },
      ],
    }
    const { status, stdout, stderr } = await run(['allocate'], JSON.stringify(scenario))
    expect(stderr).toBe('')
    expect(status).toBe(0)
    expect(JSON.parse(stdout)).toEqual({ grants: { a: 60, b: 50, c: 10 } })
  })

  it('applies tenants, weights and the algorithm given', async () => {
    const scenario = {
      capacity: 120,
      algorithm: 'proportional-share',
      surplus: 'hold',
      tenants: { t: { weight: 1 } },
      clients: [
        { id: 'a', wants: 1000, tenant: 't' },
        { id: 'b', wants: 50, tenant: 't' },
        { id: 'c', wants: 10, tenant: 't' },
      ],
    }
    const { status, stdout } = await run(['allocate'], JSON.stringify(scenario))
    expect(status).toBe(0)
    const grants = (JSON.parse(stdout) as { grants: Record<string, number> }).grants
    expect(grants.a).toBeCloseTo(69.6907, 4)
  })

  it('exits non-zero naming the field and value when a number is invalid', async () => {
    const { status, stdout, stderr } = await run(
      ['allocate'],
      JSON.stringify({ capacity: 10, clients: [{ id: 'a', wants: -3 }] }),
    )
    expect(status).toBe(1)
    expect(stdout).toBe('')
    expect(stderr).toContain('SLUICE_ERR_ALLOC_INVALID_NUMBER')
    expect(stderr).toContain('clients[0].wants')
    expect(stderr).toContain('received -3')
  })

  it('exits non-zero naming the field when the scenario has the wrong shape', async () => {
    const { status, stderr } = await run(
      ['allocate'],
      JSON.stringify({ capacity: 10, clients: [{ id: 'a', wants: 'lots' }] }),
    )
    expect(status).toBe(1)
    expect(stderr).toContain('SLUICE_ERR_CLI_INPUT')
    expect(stderr).toContain('clients[0].wants')
  })

  it('refuses unknown fields rather than ignoring them', async () => {
    const { status, stderr } = await run(
      ['allocate'],
      JSON.stringify({ capacity: 10, clients: [], extra: 1 }),
    )
    expect(status).toBe(1)
    expect(stderr).toContain('extra')
  })

  it('exits non-zero when stdin is not JSON', async () => {
    const { status, stderr } = await run(['allocate'], '{nope')
    expect(status).toBe(1)
    expect(stderr).toContain('stdin is not JSON')
  })
})

describe('sluice command line', () => {
  it('prints help and exits 0 for `help`', async () => {
    const { status, stdout } = await run(['help'])
    expect(status).toBe(0)
    expect(stdout).toContain('sluice <command>')
  })

  it('exits 2 with a usage error for an unknown command', async () => {
    const { status, stderr } = await run(['frobnicate'])
    expect(status).toBe(2)
    expect(stderr).toContain('SLUICE_ERR_CLI_USAGE')
  })
})

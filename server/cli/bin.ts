#!/usr/bin/env node
import nodeModule from 'node:module'

// Node 22.1 and later keep V8's compiled code of every module between starts (in the OS's
// temporary directory; NODE_DISABLE_COMPILE_CACHE=1 turns it off): a coordinator restarted
// listens about 90 ms sooner on Node 24 (docs/benchmarks.md, Failover). Node 20 has no such
// cache. Turned on before the CLI's modules load, so they come from it.
;(nodeModule as { enableCompileCache?: () => unknown }).enableCompileCache?.()
const { runCli } = await import('./main.js')

// A reader that stops reading (`sluice simulate … | head`) ends the output, not with a crash.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error
  process.exit(process.exitCode ?? 0)
})

process.exitCode = await runCli(process.argv.slice(2), {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  ...(process.stdin.isTTY && process.stdout.isTTY
    ? { tty: { input: process.stdin, output: process.stdout } }
    : {}),
})

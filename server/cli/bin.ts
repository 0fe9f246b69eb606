#!/usr/bin/env node
import { runCli } from './main.js'

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

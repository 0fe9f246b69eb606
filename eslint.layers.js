// @ts-check
// The layers of docs/architecture.md, enforced on imports:
//   server/cli → server/sim → the coordinator library (the rest of server/) → client/ → shared/
// and, inside the library, another folder is imported only through its index.js
// (a sub-folder may import the modules of the folder it sits in).

/** Time is injected: only shared/clock.ts may import the ambient timers. */
export const timerPaths = [
  { name: 'node:timers', message: 'Use the injected Clock.' },
  { name: 'node:timers/promises', message: 'Use the injected Clock.' },
  { name: 'timers', message: 'Use the injected Clock.' },
]

const indexOnly = {
  regex: '^(\\.\\.?/)+([^./][^/]*/)+(?!index\\.js$)[^/]+$',
  message: 'Import another folder through its index.js (docs/architecture.md, layers).',
}
const noApplications = {
  regex: '^(\\.\\./)+(bench|examples|test)/',
  message: 'The library imports no benchmark, example or test.',
}

/** @param {Array<{ regex: string, message: string }>} patterns */
const restrict = (patterns) => ({
  'no-restricted-imports': ['error', { paths: timerPaths, patterns }],
})

export const layers = [
  {
    files: ['shared/**/*.ts'],
    rules: restrict([
      indexOnly,
      noApplications,
      {
        regex: '^(\\.\\./)+(client|server)/',
        message: 'shared/ is the bottom layer: it imports neither client/ nor server/.',
      },
    ]),
  },
  {
    files: ['client/**/*.ts'],
    rules: restrict([
      indexOnly,
      noApplications,
      { regex: '^(\\.\\./)+server/', message: 'client/ sits below server/: it never imports it.' },
    ]),
  },
  {
    files: ['server/**/*.ts'],
    ignores: ['server/cli/**', 'server/sim/**'],
    rules: restrict([
      indexOnly,
      noApplications,
      {
        regex: '(^|/)(cli|sim)/',
        message:
          'server/cli and server/sim are applications above the coordinator library: the library never imports them.',
      },
    ]),
  },
  {
    files: ['server/sim/**/*.ts'],
    rules: restrict([
      indexOnly,
      noApplications,
      { regex: '(^|/)cli/', message: 'The simulator sits below the CLI: it never imports it.' },
    ]),
  },
  {
    files: ['server/cli/**/*.ts'],
    rules: restrict([indexOnly, noApplications]),
  },
]

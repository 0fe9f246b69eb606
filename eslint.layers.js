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

const libraryBelowApps = {
  regex: '(^|/)(cli|sim)/',
  message:
    'server/cli and server/sim are applications above the coordinator library: the library never imports them.',
}
const sharedBottom = {
  regex: '^(\\.\\./)+(client|server)/',
  message: 'shared/ is the bottom layer: it imports neither client/ nor server/.',
}

export const layers = [
  {
    files: ['shared/**/*.ts'],
    rules: restrict([indexOnly, noApplications, sharedBottom]),
  },
  {
    // The local limiters stand alone (sluice/limiters): the clock, the coarse clock and the
    // error catalogue, nothing of the protocol.
    files: ['shared/limiters/**/*.ts'],
    rules: restrict([
      indexOnly,
      noApplications,
      sharedBottom,
      {
        regex: '^\\.\\./(?!(clock|coarse-clock|errors)\\.js$)',
        message:
          'The limiters stand alone: they import only shared/clock, shared/coarse-clock and shared/errors.',
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
    rules: restrict([indexOnly, noApplications, libraryBelowApps]),
  },
  {
    // What operators see is read from the coordinator's view, never from the coordinator.
    files: ['server/observe/**/*.ts'],
    rules: restrict([
      indexOnly,
      noApplications,
      libraryBelowApps,
      {
        regex: '^\\.\\./coordinator/',
        message:
          'server/observe reads the pool through its view: it never imports the coordinator.',
      },
    ]),
  },
  {
    // The coordinator's parts read it through Core (core.ts): none imports the coordinator.
    files: ['server/coordinator/**/*.ts'],
    ignores: ['server/coordinator/coordinator.ts', 'server/coordinator/index.ts'],
    rules: restrict([
      indexOnly,
      noApplications,
      libraryBelowApps,
      {
        regex: '^\\./coordinator\\.js$',
        message: "The coordinator's parts read it through Core (core.ts): they never import it.",
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

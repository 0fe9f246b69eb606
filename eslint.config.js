// @ts-check
import js from '@eslint/js'
import tseslint from 'typescript-eslint'
import { layers, timerPaths } from './eslint.layers.js'

// Time is injected: only shared/clock.ts may touch the ambient clock and timers.
const ambientTime = {
  'no-restricted-globals': [
    'error',
    { name: 'setTimeout', message: 'Use the injected Clock (shared/clock.ts).' },
    { name: 'setInterval', message: 'Use the injected Clock (shared/clock.ts).' },
    { name: 'setImmediate', message: 'Use the injected Clock (shared/clock.ts).' },
    { name: 'performance', message: 'Use the injected Clock (shared/clock.ts).' },
  ],
  'no-restricted-properties': [
    'error',
    { object: 'Date', property: 'now', message: 'Use the injected Clock (shared/clock.ts).' },
    { object: 'performance', property: 'now', message: 'Use the injected Clock.' },
    { object: 'globalThis', property: 'setTimeout', message: 'Use the injected Clock.' },
    { object: 'globalThis', property: 'setInterval', message: 'Use the injected Clock.' },
  ],
  'no-restricted-imports': ['error', { paths: timerPaths }],
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'test-results/**', '.ci/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      ...ambientTime,
      '@typescript-eslint/no-floating-promises': 'error',
      // fastify route handlers are async by contract, whether or not they await.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-restricted-syntax': [
        'error',
        { selector: 'TSEnumDeclaration', message: 'No enums: use `as const` objects and unions.' },
      ],
    },
  },
  ...layers,
  {
    // The one place that owns ambient time; benchmarks measure wall-clock time by design.
    files: ['shared/clock.ts', 'bench/**'],
    rules: {
      'no-restricted-globals': 'off',
      'no-restricted-properties': 'off',
      'no-restricted-imports': 'off',
    },
  },
  {
    // Tests read JSON bodies (`res.json()`, any) and poke at internals on purpose.
    files: ['test/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
    },
  },
  {
    files: ['eslint.config.js', 'eslint.layers.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The dashboard's page script runs in the browser, on the browser's own clock.
    files: ['server/http/dashboard/assets/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'script',
      globals: Object.fromEntries(
        [
          'window',
          'document',
          'location',
          'history',
          'fetch',
          'sessionStorage',
          'ResizeObserver',
          'CSS',
          'uPlot',
          'setInterval',
        ].map((name) => [name, 'readonly']),
      ),
    },
    rules: {
      ...tseslint.configs.disableTypeChecked.rules,
      'no-restricted-globals': 'off',
      'no-restricted-properties': 'off',
    },
  },
)

import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    setupFiles: ['test/helpers/setup.ts'],
    reporters: ['default', ['json', { outputFile: 'test-results/vitest.json' }]],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Browser pages refresh on real time (every second): a poll waits for several refreshes.
    expect: { poll: { timeout: 10_000, interval: 100 } },
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: ['test/**/*.test.ts'],
          exclude: [
            'test/faults/faults.test.ts',
            'test/faults/hostile.test.ts',
            'test/faults/keyed.test.ts',
            'test/faults/quota.test.ts',
            'test/faults/keyed-quota.test.ts',
            'test/faults/hostile-keys.test.ts',
            'test/faults/clock-steps.test.ts',
            'test/faults/key-reset.test.ts',
            'test/faults/quota-edge.test.ts',
            'test/faults/central-restart.test.ts',
          ],
          sequence: { groupOrder: 0 },
          // Two files at once even on two cores (vitest's default there is one): the suite's
          // clocks are manual, and its real sockets and processes wait by polling, not by
          // sleeps. On 2 cores at CI depth (FC_NUM_RUNS=1000): 353 s, against about 645 s one
          // file at a time, which had put the whole CI run near its 30 minutes.
          maxWorkers: Math.max(2, availableParallelism() - 1),
        },
      },
      {
        // Real processes on real time: run after everything else, one scenario at a time, so the
        // machine's load does not stretch message delays beyond what the scenarios assume.
        extends: true,
        test: {
          name: 'faults',
          include: [
            'test/faults/faults.test.ts',
            'test/faults/hostile.test.ts',
            'test/faults/keyed.test.ts',
            'test/faults/quota.test.ts',
            'test/faults/keyed-quota.test.ts',
            'test/faults/hostile-keys.test.ts',
            'test/faults/clock-steps.test.ts',
            'test/faults/key-reset.test.ts',
            'test/faults/quota-edge.test.ts',
            'test/faults/central-restart.test.ts',
          ],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
})

import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each test file gets its own process: Dawn wants one instance per process, destroyed before exit.
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});

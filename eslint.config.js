// Lint rules that keep runs replayable (DESIGN.md rules 1 and 5): runtime code takes no decision from the wall
// clock or from unseeded randomness. Benchmarks and display-only command-line code may read clocks.
import tseslint from 'typescript-eslint';

const clocks = [
  { object: 'Math', property: 'random', message: 'Use a named seeded stream (seedrandom), never Math.random.' },
  { object: 'Date', property: 'now', message: 'No wall clock in runtime code: decisions depend on the step, not the time.' },
  { object: 'performance', property: 'now', message: 'No wall clock in runtime code; time things in bench/.' },
  { object: 'process', property: 'hrtime', message: 'No wall clock in runtime code; time things in bench/.' },
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'out/**'] },
  {
    files: ['**/*.ts'],
    languageOptions: { parser: tseslint.parser },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true, argsIgnorePattern: '^_' }],
      'no-restricted-properties': ['error', ...clocks],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'Timers make actor interleavings nondeterministic; advance by steps.' },
        { name: 'setInterval', message: 'Timers make actor interleavings nondeterministic; advance by steps.' },
      ],
      'no-restricted-syntax': ['error', { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'No wall clock in runtime code.' }],
    },
  },
  {
    // A sweep starts run processes and waits on them: wall times and progress polling. No run's content depends on it.
    files: ['src/sweep/runner.ts'],
    rules: { 'no-restricted-properties': 'off', 'no-restricted-globals': 'off' },
  },
  {
    // Display-only timing: benchmark tables, the progress and throughput lines of the command line.
    files: ['bench/**/*.ts', 'src/cli/**/*.ts', 'test/**/*.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
);

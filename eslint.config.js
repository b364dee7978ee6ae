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
    // The runtime's two floors (docs/architecture.md). src/runtime/ is what actors run on (the world, the event log
    // and its recorder, streams, worker threads, durable files, the run lock): it knows no actor and no simulation,
    // so a transport can be swapped under the actors without touching what they do.
    files: ['src/runtime/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '(^|/)(actors|sim|cli|report|sweep)/', message: 'src/runtime/ is the floor below the actors: it may not import actors/ or what assembles a simulation (src/sim/, and the cli, report and sweep above it).' }] }],
    },
  },
  {
    // The actors stand on src/runtime/ and the libraries beside it; what assembles and runs them (src/sim/) is above.
    files: ['actors/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '(^|/)src/(sim|cli|report|sweep)/', message: 'actors may not import src/sim/ (or the cli, report and sweep above it): those assemble and run the actors.' }] }],
    },
  },
  {
    // A sweep starts run processes and waits on them: wall times and progress polling. No run's content depends on it.
    files: ['src/sweep/runner.ts'],
    rules: { 'no-restricted-properties': 'off', 'no-restricted-globals': 'off' },
  },
  {
    // The process's deadline to unwind after a stop at once (a second Ctrl-C): no run's content depends on it.
    files: ['src/cli/stop-signals.ts'],
    rules: { 'no-restricted-globals': 'off' },
  },
  {
    // The dashboard (populora serve) polls run folders as they grow and shows ETAs: it takes no part in any run, and
    // no run's content depends on it.
    files: ['src/serve/**/*.ts'],
    rules: { 'no-restricted-properties': 'off', 'no-restricted-globals': 'off' },
  },
  {
    // A cluster process's watch on its NATS server: since when it is lost, when to give it up (a limit, like a
    // request's deadline: wall clock outside the replayed data). No run's content depends on it.
    files: ['src/cluster/server-watch.ts'],
    rules: { 'no-restricted-properties': 'off', 'no-restricted-globals': 'off' },
  },
  {
    // Display-only timing: benchmark tables, the progress and throughput lines of the command line.
    files: ['bench/**/*.ts', 'src/cli/**/*.ts', 'test/**/*.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
);

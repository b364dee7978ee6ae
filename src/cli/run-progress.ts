// `populora run`'s progress bar: the steps done, the last step's figures, and where the step in progress stands
// (its phase and the tokens through the model of how many: a real-size step lasts minutes). On a terminal it redraws
// in place; elsewhere (a log file, CI) cli-progress prints it every 30 seconds. Display only: nothing reads it back.

import cliProgress from 'cli-progress';
import type { PhaseProgress } from '../engine/pacer.js';
import type { StepMetrics } from '../sim/metrics.js';

export const percent = (x: number | null) => (x === null ? '  -  ' : `${(100 * x).toFixed(0).padStart(3)}%`);

const PHASE_WORDS: Record<PhaseProgress['phase'], string> = { generate: 'generating', train: 'training' };

/** "training 1.2k/4.8k tokens": a phase's words, its tokens done and of how many. */
export function phaseText(progress: PhaseProgress): string {
  const count = (n: number) => (n >= 10_000 ? `${(n / 1000).toFixed(0)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n));
  return `${PHASE_WORDS[progress.phase]} ${count(progress.done)}/${count(progress.total)} tokens`;
}

export class RunProgress {
  private readonly bar = new cliProgress.SingleBar(
    {
      format: 'step {value}/{total} |{bar}| {phase} | solve {solve} | teacher reward {reward} | valid {valid} | coverage {coverage} | {eta_formatted} left',
      hideCursor: true,
      etaBuffer: 4,
      noTTYOutput: true,
      notTTYSchedule: 30_000,
    },
    cliProgress.Presets.shades_classic,
  );

  constructor(private readonly steps: number) {}

  start(step: number): void {
    this.bar.start(this.steps, step, { phase: 'starting', solve: '  -  ', reward: '  -  ', valid: '  -  ', coverage: 0 });
  }

  /** Inside a step: its phase and how far it is. */
  phase(progress: PhaseProgress): void {
    this.bar.update({ phase: phaseText(progress) });
  }

  /** A step done, with its figures. */
  step(m: StepMetrics): void {
    this.bar.update(m.step + 1, { phase: 'step done', solve: percent(m.solveRate), reward: m.teacherReward.toFixed(2), valid: percent(m.validity), coverage: m.coverage });
  }

  stop(): void {
    this.bar.stop();
  }
}

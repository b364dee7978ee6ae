// `populora init DIR`: a new experiment folder, runnable at once. A scenario on the embedded pretrained toy model
// (models/arith-tiny), a matchmaking policy of its own to edit (a plug-in: docs/plugins.md), a sweep of that policy
// against the built-in cross-population policy at equal compute, and a README of four lines:
//
//   npx populora init my-experiment && npx populora sweep my-experiment/sweep.yaml
//
// The policy imports `populora`, which resolves to the running populora wherever the folder is (npx's included).

import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { UsageError } from './usage-error.js';

const SCENARIO = `# An experiment on the toy model shipped with populora (models/arith-tiny: it solves about 45% of held-out
# arithmetic tasks). Every field and its bounds: populora's docs/scenarios.md; plug-ins: docs/plugins.md.
name: NAME
seed: 1
steps: 8
backend: cpu # the toy model is fastest on the CPU; auto picks a GPU where there is one
model: { embedded: arith-tiny }
population:
  subpopulations: 2
  teachers: 1
  students: 2
  lora: { rank: 4, modules: [q_proj, v_proj] }
tasks: { perTeacher: 2 }
matchmaking:
  policy: ./policies/near-rating.js # your policy: edit it, or name a built-in (cross, within, random, rating, pfsp, self)
  studentsPerTask: 2
  options: { spread: 50 }
sampling: { answersPerStudent: 4, maxTokens: 24 }
rl: { lr: 0.003 }
evolution: { every: 4, fraction: 0.5 }
evaluation: { tasks: 50 } # every member scored on 50 held-out tasks at the end
`;

const POLICY = `// A matchmaking policy: which students answer a teacher's task. This one prefers students whose rating is near
// the teacher's: weight exp(-|rating difference| / spread), drawn without replacement from the seeded stream the
// context gives (never Math.random or the clock: a run must replay from its seed). Edit it, then run the sweep.
// The context: teacher, students (id, role, subpopulation, rating, sigma?), count, rng, options,
// winProbability(student, teacher), history(teacher, student). docs/plugins.md has the rest.
import { defineMatchPolicy, z } from 'populora';

export default defineMatchPolicy({
  options: z.strictObject({ spread: z.number().positive().default(50) }),
  choose({ teacher, students, count, rng, options }) {
    const pool = [...students];
    const chosen = [];
    while (chosen.length < count && pool.length > 0) {
      const weights = pool.map((s) => Math.exp(-Math.abs(s.rating - teacher.rating) / options.spread));
      let u = rng.next() * weights.reduce((a, b) => a + b, 0);
      let pick = weights.findIndex((w) => (u -= w) < 0);
      if (pick < 0) pick = pool.length - 1;
      chosen.push(pool.splice(pick, 1)[0]);
    }
    return chosen;
  },
});
`;

const SWEEP = `# Your policy against the built-in cross-population policy, at equal compute, over 2 seeds.
name: NAME # the sweep's folder: runs/NAME
base: scenario.yaml
variants:
  near-rating: {}
  cross: { matchmaking: { policy: cross, studentsPerTask: 2 } }
grid:
  seed: [1..2]
`;

const readme = (dir: string) => `# ${basename(resolve(dir))}: a populora experiment
Run it: \`npx populora sweep ${join(dir, 'sweep.yaml')}\` (4 short runs, 2 at a time), then compare: \`npx populora compare runs/NAME --out runs/NAME/compare.html\`.
Edit \`policies/near-rating.js\` (your matchmaking policy) or \`scenario.yaml\`; a run records each plug-in's hash and \`npx populora replay runs/NAME/near-rating_seed-1\` checks it bit for bit.
Writing plug-ins (policies, domains, evolution operators, ratings, rewards): populora's docs/plugins.md.
`;

export async function initCommand(dir: string): Promise<void> {
  if (existsSync(dir) && readdirSync(dir).length > 0) throw new UsageError(`${dir} is not empty: populora init makes a new experiment folder; give a new or empty one`);
  const name = basename(resolve(dir)).replace(/[^A-Za-z0-9._-]+/g, '-') || 'experiment';
  mkdirSync(join(dir, 'policies'), { recursive: true });
  const files: Array<[string, string]> = [
    ['scenario.yaml', SCENARIO.replace('NAME', name)],
    ['policies/near-rating.js', POLICY],
    ['sweep.yaml', SWEEP.replaceAll('NAME', name)],
    ['README.md', readme(dir).replaceAll('runs/NAME', `runs/${name}`)],
    ['package.json', `${JSON.stringify({ name, private: true, type: 'module', description: 'a populora experiment: its plug-ins are ES modules' }, null, 2)}\n`],
  ];
  for (const [file, text] of files) writeFileSync(join(dir, file), text);
  console.log(`wrote a populora experiment to ${dir}: ${files.map(([file]) => file).join(', ')}`);
  console.log(`run it with: npx populora sweep ${join(dir, 'sweep.yaml')}`);
}

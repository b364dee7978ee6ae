// Advantages from rewards, normalised within groups of sequences:
//   task-relative REINFORCE++ (AZR): group = (role, task type): A = (r - mean) / std over the group
//   GRPO: group = the samples of one prompt: A = (r - mean) / std
//   'center': A = r - mean (no division, e.g. when a group's rewards are on a meaningful scale; Dr. GRPO)
// A group whose rewards are all equal gets advantage 0 (nothing to learn from it, and no 0/0).

export type AdvantageScaling = 'whiten' | 'center';

/**
 * How a step's training samples are grouped (rl.advantageGroups):
 *   role-and-task  per (role, task type) over the whole population: AZR's task-relative REINFORCE++ (6 groups)
 *   task           a student's answers to one task form a group (GRPO's group: one policy, one prompt), so a task
 *                  every answer gets right, or none does, teaches nothing and the baseline is the task's own solve
 *                  rate; teachers' proposals as in role-and-task (a teacher's prompt is its type's, one proposal
 *                  or a few, too few for a group of their own)
 *   role           per role
 *   none           one group
 */
export const ADVANTAGE_GROUPS = ['role-and-task', 'task', 'role', 'none'] as const;
export type AdvantageGroups = (typeof ADVANTAGE_GROUPS)[number];

/** What grouping needs to know of a sample: its role and task type, and for a student the task (any key naming it) and the adapter slot. */
export interface GroupedSample {
  role: string;
  taskType: string;
  slot: number;
  task: string;
}

/** The key of the group a sample's advantage is normalised in. */
export function advantageGroup(groups: AdvantageGroups, sample: GroupedSample): string {
  if (groups === 'none') return 'all';
  if (groups === 'role') return sample.role;
  if (groups === 'task' && sample.role === 'student') return `student/${sample.slot}/${sample.task}`;
  return `${sample.role}/${sample.taskType}`;
}

export function groupAdvantages(rewards: readonly number[], groups: readonly string[], scaling: AdvantageScaling = 'whiten', eps = 1e-6): number[] {
  if (rewards.length !== groups.length) throw new RangeError(`advantages: ${rewards.length} rewards but ${groups.length} group keys`);
  const members = new Map<string, number[]>();
  groups.forEach((g, i) => members.set(g, [...(members.get(g) ?? []), i]));
  const advantages = new Array<number>(rewards.length).fill(0);
  for (const indices of members.values()) {
    const values = indices.map((i) => rewards[i]!);
    if (values.some((r) => !Number.isFinite(r))) throw new RangeError(`advantages: a reward is not a finite number (${values.join(', ')})`);
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    const std = Math.sqrt(values.reduce((a, r) => a + (r - mean) ** 2, 0) / values.length);
    indices.forEach((i) => (advantages[i] = scaling === 'center' ? rewards[i]! - mean : std < eps ? 0 : (rewards[i]! - mean) / (std + eps)));
  }
  return advantages;
}

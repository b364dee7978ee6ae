// Advantages from rewards, normalised within groups of sequences:
//   task-relative REINFORCE++ (AZR): group = (role, task type): A = (r - mean) / std over the group
//   GRPO: group = the samples of one prompt: A = (r - mean) / std
//   'center': A = r - mean (no division, e.g. when a group's rewards are on a meaningful scale)
// A group whose rewards are all equal gets advantage 0 (nothing to learn from it, and no 0/0).

export type AdvantageScaling = 'whiten' | 'center';

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

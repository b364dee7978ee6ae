// Each kind of plug-in: the members its default export must have (checked, each missing or mistyped one named with
// the file), the defaults of the optional ones, and how it joins its registry. Every function a plug-in gives is
// called through the replay guard (guard.ts), and what it answers is checked where a wrong answer would go on
// quietly (a policy choosing a student twice, or one not on the roster).

import type { Domain } from '../domains/domain.js';
import { registerDomain } from '../domains/index.js';
import { registerEvolutionOperator } from '../evolution/registry.js';
import { registerMatchPolicy, type MatchContext, type MatchPolicy, type MemberView } from '../matchmaking/index.js';
import { registerRatingSystem } from '../rating/rating.js';
import { registerRewardHook } from '../rewards/rules.js';
import type { PluginKind } from '../scenario/plugin-fields.js';
import type { DomainPlugin, MatchPolicyPlugin, RatingSystemPlugin } from './define.js';
import { PluginError } from './errors.js';
import { guarded } from './guard.js';
import { asZod, isOptionsSchema, type OptionsSchema } from './options.js';

type MemberType = 'function' | 'string' | 'number' | 'boolean' | 'array' | 'object or null' | 'options schema';

interface Member {
  name: string;
  type: MemberType;
  required: boolean;
}

const required = (name: string, type: MemberType): Member => ({ name, type, required: true });
const optional = (name: string, type: MemberType): Member => ({ name, type, required: false });

/** What each kind's module exports, as `populora` names it in messages. */
export const KIND_NAMES: Record<PluginKind, string> = { domain: 'domain', policy: 'matchmaking policy', operator: 'evolution operator', rating: 'rating system', reward: 'reward hook' };

const MEMBERS: Record<PluginKind, Member[]> = {
  policy: [required('choose', 'function'), optional('options', 'options schema'), optional('reach', 'function'), optional('requirement', 'function'), optional('studentsAreTeacherTwins', 'boolean'), optional('needsHistory', 'function')],
  domain: [
    required('name', 'string'), required('taskTypes', 'array'), required('proposalPrompt', 'function'), required('solvePrompt', 'function'), required('minimumTokens', 'function'), required('verifierPool', 'function'),
    optional('alphabet', 'string'), optional('presetContext', 'number'), optional('seedReferences', 'array'), optional('prompts', 'object or null'), optional('tokenBudgetHint', 'number'),
    optional('tokenMask', 'function'), optional('tokenAutomaton', 'function'), optional('heldOutTasks', 'function'), optional('pretraining', 'object or null'), optional('commands', 'array'),
  ],
  operator: [optional('options', 'options schema'), optional('mutate', 'function'), optional('crossover', 'function')],
  rating: [required('create', 'function'), optional('options', 'options schema')],
  reward: [optional('options', 'options schema'), optional('teacher', 'function'), optional('student', 'function')],
};

function hasType(value: unknown, type: MemberType): boolean {
  switch (type) {
    case 'array':
      return Array.isArray(value);
    case 'object or null':
      return value === null || (typeof value === 'object' && !Array.isArray(value));
    case 'options schema':
      return isOptionsSchema(value);
    default:
      return typeof value === type;
  }
}

export class PluginShapeError extends PluginError {}

/**
 * Checks a module's default export against its kind; `field` is the scenario field naming it (an operator named
 * by `evolution.crossover` must have `crossover`). Throws a PluginShapeError naming the file and each problem.
 */
export function checkShape(kind: PluginKind, value: unknown, file: string, field: string): void {
  const what = `${file} (${field}): its default export`;
  if (typeof value !== 'object' || value === null) throw new PluginShapeError(`${what} is ${value === null ? 'null' : typeof value}, not a ${KIND_NAMES[kind]} (an object: docs/plugins.md)`);
  const members = [...MEMBERS[kind]];
  if (field === 'evolution.mutation') members.push(required('mutate', 'function'));
  if (field === 'evolution.crossover') members.push(required('crossover', 'function'));
  const problems: string[] = [];
  for (const member of members) {
    const present = (value as Record<string, unknown>)[member.name];
    if (present === undefined) {
      if (member.required && !problems.some((p) => p.startsWith(`no ${member.name}`))) problems.push(`no ${member.name} (${member.type}), which a ${KIND_NAMES[kind]} must have`);
    } else if (!hasType(present, member.type)) {
      problems.push(`${member.name} is ${Array.isArray(present) ? 'an array' : typeof present}, not ${member.type === 'options schema' ? 'an options schema (e.g. a zod object: docs/plugins.md)' : `a ${member.type}`}`);
    }
  }
  if (kind === 'reward' && (value as Record<string, unknown>)['teacher'] === undefined && (value as Record<string, unknown>)['student'] === undefined) problems.push('neither teacher nor student (a reward hook shapes at least one role)');
  if (kind === 'domain' && Array.isArray((value as Domain).taskTypes) && (value as Domain).taskTypes.length === 0) problems.push('an empty taskTypes (a domain has at least one task type)');
  if (problems.length > 0) throw new PluginShapeError(`${what} has ${problems.join('; ')}`);
}

/** A plug-in policy as the matchmaker runs it: defaults filled in, every call guarded, each choice checked. */
function policyOf(plugin: MatchPolicyPlugin<Record<string, unknown>>, file: string): MatchPolicy<Record<string, unknown>> {
  const who = (member: string) => `the matchmaking policy ${file}, ${member}()`;
  const wrap = <A extends unknown[], R>(member: string, fn: ((...args: A) => R) | undefined) => (fn ? guarded(who(member), fn.bind(plugin)) : undefined);
  const choose = wrap('choose', plugin.choose)!;
  return {
    options: asZod(plugin.options as OptionsSchema | undefined, file) as MatchPolicy<Record<string, unknown>>['options'],
    reach: wrap('reach', plugin.reach) ?? (({ subpopulations, students }) => subpopulations * students),
    ...(plugin.requirement ? { requirement: wrap('requirement', plugin.requirement) } : {}),
    ...(plugin.studentsAreTeacherTwins !== undefined ? { studentsAreTeacherTwins: plugin.studentsAreTeacherTwins } : {}),
    ...(plugin.needsHistory ? { needsHistory: wrap('needsHistory', plugin.needsHistory) } : {}),
    choose(context: MatchContext<Record<string, unknown>>): MemberView[] {
      const chosen = choose(context);
      if (!Array.isArray(chosen)) throw new TypeError(`${who('choose')} returned ${String(chosen)}, not an array of students`);
      const ids = new Set<string>();
      for (const student of chosen) {
        if (!context.students.some((s) => s.id === student?.id)) throw new RangeError(`${who('choose')} chose ${JSON.stringify(student?.id ?? student)}, which is not one of context.students`);
        if (ids.has(student.id)) throw new RangeError(`${who('choose')} chose ${student.id} twice for one task`);
        ids.add(student.id);
      }
      if (chosen.length > context.count) throw new RangeError(`${who('choose')} chose ${chosen.length} students, more than context.count (${context.count})`);
      return chosen.map((student) => context.students.find((s) => s.id === student.id)!);
    },
  };
}

const PRINTABLE = `${Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('')}\n`;

/**
 * A plug-in domain with its defaults filled in and its synchronous functions guarded. Members are read one by one
 * (a domain may be a class instance, its methods on the prototype) and bound to it.
 */
function domainOf(plugin: DomainPlugin, file: string): Domain {
  const read = (name: keyof Domain): unknown => {
    const value = plugin[name as keyof DomainPlugin];
    return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(plugin) : value;
  };
  const guardedRead = (name: keyof Domain) => {
    const fn = read(name) as ((...args: unknown[]) => unknown) | undefined;
    return fn === undefined ? {} : { [name]: guarded(`the domain ${file}, ${name}()`, fn) };
  };
  const minimumTokens = guarded(`the domain ${file}, minimumTokens()`, read('minimumTokens') as Domain['minimumTokens']);
  const optional = (name: keyof Domain) => (plugin[name as keyof DomainPlugin] === undefined ? {} : { [name]: read(name) });
  return {
    name: plugin.name,
    taskTypes: plugin.taskTypes,
    alphabet: plugin.alphabet ?? PRINTABLE,
    presetContext: plugin.presetContext ?? 256,
    seedReferences: plugin.seedReferences ?? [],
    prompts: plugin.prompts ?? null,
    tokenBudgetHint: plugin.tokenBudgetHint ?? 2 * Math.max(...plugin.taskTypes.map((type) => minimumTokens([type]))),
    minimumTokens,
    verifierPool: read('verifierPool') as Domain['verifierPool'],
    ...guardedRead('proposalPrompt'),
    ...guardedRead('solvePrompt'),
    ...guardedRead('tokenMask'),
    ...guardedRead('tokenAutomaton'),
    ...guardedRead('heldOutTasks'),
    ...optional('pretraining'),
    commands: [], // a plug-in domain's commands are not added to the command line (it is loaded with a scenario)
  } as unknown as Domain; // proposalPrompt and solvePrompt are required members (checkShape)
}

/** Registers a checked plug-in under `key` (its module's absolute path) in its kind's registry. */
export function registerPlugin(kind: PluginKind, value: object, key: string): void {
  const options = asZod((value as { options?: OptionsSchema }).options, key);
  switch (kind) {
    case 'policy':
      return registerMatchPolicy(key, policyOf(value as MatchPolicyPlugin<Record<string, unknown>>, key));
    case 'domain':
      return registerDomain(domainOf(value as DomainPlugin, key), key, true);
    case 'operator':
      return registerEvolutionOperator(key, value, options);
    case 'rating':
      return registerRatingSystem(key, value as RatingSystemPlugin<unknown>, options);
    case 'reward':
      return registerRewardHook(key, value, options);
  }
}

// The code domain's prompts, filled from templates: a teacher's (reference tasks of its buffer, then the request
// for a new task of a type) and a student's (the task as its type shows it). Two built-in styles, each a YAML file
// in prompts/: `plain`, short, for preset models and models pretrained here; `azr`, Absolute Zero Reasoner's, for
// real models. A scenario may replace any template (src/domains/prompts.ts). The slots each template may name are
// below; those a template must name are the ones without which its prompt cannot be answered.

import { parse } from 'yaml';
import type { PromptCatalog, PromptSet, TemplateSpec } from '../domain.js';
import { fill, finishPrompt, slotsOf } from '../prompts.js';
import { readPackageFile } from './package-files.js';
import { CODE_TASK_TYPES, FUNCTION_PAIRS, shownPairs, type CodeTask, type CodeTaskType } from './tasks.js';

const fence = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;

// A proposal template naming {{program}} shows the first reference's program and asks for inputs to it (AZR's
// code_f): the proposal's program is then that one.
const PROPOSAL: TemplateSpec = { slots: ['references', 'task_type', 'inputs_wanted', 'input_count', 'program'], required: [] };
const SOLVE: Record<CodeTaskType, TemplateSpec> = {
  code_o: { slots: ['program', 'input', 'task_type'], required: ['program', 'input'] },
  code_i: { slots: ['program', 'output', 'task_type'], required: ['program', 'output'] },
  code_f: { slots: ['pairs', 'message', 'task_type'], required: ['pairs'] }, // message: the teacher's (AZR's code_f), or ''
};

const TEMPLATES: Record<string, TemplateSpec> = {
  reference: { slots: ['number', 'index', 'task_type', 'program', 'input', 'output', 'input_blocks'], required: ['program'] }, // number counts from 1, index from 0
  pair: { slots: ['number', 'index', 'input', 'output'], required: ['input', 'output'] },
  wrap: { slots: ['prompt'], required: ['prompt'] },
  ...Object.fromEntries(CODE_TASK_TYPES.flatMap((type) => [[`${type}.proposal`, PROPOSAL], [`${type}.solve`, SOLVE[type]]])),
};

/** A style file's templates by catalog name ("code_o.solve"); prompts/ sits beside this file's source, also from dist/. */
function loadStyle(name: string): Record<string, string> {
  const mapping = parse(readPackageFile(`prompts/${name}.yaml`)) as Record<string, string | Record<string, string>>;
  return Object.fromEntries(Object.entries(mapping).flatMap(([key, value]) => (typeof value === 'string' ? [[key, value]] : Object.entries(value).map(([inner, text]) => [`${key}.${inner}`, text]))));
}

export const CODE_PROMPTS: PromptCatalog = { templates: TEMPLATES, styles: { plain: loadStyle('plain'), azr: loadStyle('azr') }, defaultStyle: { toy: 'plain', real: 'azr' } };

/** The plain style, as a run on a preset model uses it. */
export const PLAIN_PROMPTS: PromptSet = { templates: CODE_PROMPTS.styles.plain!, chat: 'none' };

const reference = (prompts: PromptSet) => (task: CodeTask, i: number) =>
  fill(prompts.templates.reference!, { number: String(i + 1), index: String(i), task_type: task.type, program: task.program, input: task.inputs[0]!, output: task.outputs[0]!, input_blocks: task.inputs.map((input) => fence('input', input)).join('\n') });

/** A teacher's prompt: reference tasks of its buffer, then the request for a new task of the type. */
export function proposalPrompt(type: CodeTaskType, references: readonly CodeTask[], prompts: PromptSet = PLAIN_PROMPTS): string {
  const text = fill(prompts.templates[`${type}.proposal`]!, {
    references: references.map(reference(prompts)).join('\n'),
    task_type: type,
    inputs_wanted: type === 'code_f' ? `${FUNCTION_PAIRS.min} to ${FUNCTION_PAIRS.max} inputs` : 'one input',
    input_count: String(type === 'code_f' ? FUNCTION_PAIRS.max : 1),
    program: references[0]?.program ?? '',
  });
  return finishPrompt(prompts, text);
}

/** What the teacher's prompt already gives of its proposal: the program it shows, when its template names one. */
export function proposalGiven(type: CodeTaskType, references: readonly CodeTask[], prompts: PromptSet = PLAIN_PROMPTS): string {
  const shown = references[0];
  return shown && slotsOf(prompts.templates[`${type}.proposal`]!).includes('program') ? fence('python', shown.program) : '';
}

/** A student's prompt: the task as its type shows it (code_f: the shown half of the pairs, and the message). */
export function solvePrompt(task: CodeTask, prompts: PromptSet = PLAIN_PROMPTS): string {
  const pair = (input: string, i: number) => fill(prompts.templates.pair!, { number: String(i + 1), index: String(i), input, output: task.outputs[i]! });
  const text = fill(prompts.templates[`${task.type}.solve`]!, {
    task_type: task.type,
    program: task.program,
    input: task.inputs[0]!,
    output: task.outputs[0]!,
    pairs: task.inputs.slice(0, shownPairs(task)).map(pair).join('\n'),
    message: task.message ?? '',
  });
  return finishPrompt(prompts, text);
}

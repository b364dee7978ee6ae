// Prompt templates: text with {{slot}} fields that a domain fills (its catalog says which slots each template may
// and must use). A scenario's `prompts` picks a built-in style, a chat format and any templates of its own, inline
// or in a YAML file beside the scenario:
//
//   prompts: { style: azr, chat: chatml, code_o: { solve: "…{{program}}…{{input}}…" }, wrap: "{{prompt}}" }
//   prompts: my-prompts.yaml      # the same mapping (style and chat optional), relative to the scenario's folder
//
// At load the scenario's prompts are resolved to what a run records in scenario.json: the style and chat format
// written out, a file's templates inlined, every template checked (an unknown slot, a missing required one, or an
// unknown template is refused naming its field). The defaults follow the model: a preset, or a model folder
// pretrained here (it holds pretrain_log.json), gets the domain's toy style; any other model folder its real
// style, and ChatML if its tokenizer_config.json's chat_template is ChatML's (no Jinja is run: the user turn and
// the assistant's start are written as ChatML writes them, without a system turn).

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parse } from 'yaml';
import { CHAT_FORMATS, type ChatFormat, type Domain, type PromptCatalog, type PromptSet } from './domain.js';

/** A scenario's prompts as a run records them: style and chat written out, template overrides by field. */
export type ScenarioPrompts = { style: string; chat: ChatFormat; [template: string]: unknown };

export class TemplateError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const SLOT = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/** The slots a template names, in order of first use. */
export const slotsOf = (template: string) => [...new Set([...template.matchAll(SLOT)].map((m) => m[1]!))];

/** Fills every slot in one pass (a value that itself looks like a slot stays as written). */
export function fill(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(SLOT, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`template slot {{${name}}} has no value (the catalog allowed a slot the domain does not fill)`);
    return value;
  });
}

/** A prompt as the model is given it: through the `wrap` template if the domain has one, then the chat format. */
export function finishPrompt(prompts: PromptSet, text: string): string {
  const wrapped = prompts.templates.wrap === undefined ? text : fill(prompts.templates.wrap, { prompt: text });
  return prompts.chat === 'chatml' ? `<|im_start|>user\n${wrapped}<|im_end|>\n<|im_start|>assistant\n` : wrapped;
}

/** Holds one template against its spec; `field` names it in the error. */
export function checkTemplate(catalog: PromptCatalog, name: string, text: unknown, field: string): string {
  const spec = catalog.templates[name];
  if (!spec) throw new TemplateError(field, `unknown template (the templates are ${Object.keys(catalog.templates).join(', ')})`);
  if (typeof text !== 'string') throw new TemplateError(field, 'expected the template as text');
  const unknown = slotsOf(text).find((slot) => !spec.slots.includes(slot));
  if (unknown) throw new TemplateError(field, `unknown slot {{${unknown}}} (this template's slots: ${spec.slots.join(', ')})`);
  const missing = spec.required.find((slot) => !slotsOf(text).includes(slot));
  if (missing) throw new TemplateError(field, `the template lacks {{${missing}}}, without which the prompt cannot be answered (required: ${spec.required.join(', ')})`);
  return text;
}

/** Template overrides by catalog name ("code_o.solve", "wrap") from the scenario's nested mapping. */
function overridesOf(catalog: PromptCatalog, mapping: Record<string, unknown>, field: (name: string) => string): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (const [key, value] of Object.entries(mapping)) {
    if (key === 'style' || key === 'chat') continue;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      for (const [inner, text] of Object.entries(value)) overrides[`${key}.${inner}`] = checkTemplate(catalog, `${key}.${inner}`, text, field(`${key}.${inner}`));
    } else {
      overrides[key] = checkTemplate(catalog, key, value, field(key));
    }
  }
  return overrides;
}

const isMapping = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

/** A model folder that is not a preset nor pretrained here: a real model, which gets the domain's real style. */
const isRealModel = (model: { path: string } | { preset: string }) => 'path' in model && !existsSync(join(model.path, 'pretrain_log.json'));

/** ChatML when the model's tokenizer_config.json has a chat template written in ChatML's markers. */
function chatOf(model: { path: string } | { preset: string }): ChatFormat {
  if (!('path' in model)) return 'none';
  const file = join(model.path, 'tokenizer_config.json');
  if (!existsSync(file)) return 'none';
  let template: unknown;
  try {
    template = (JSON.parse(readFileSync(file, 'utf8')) as { chat_template?: unknown }).chat_template;
  } catch (error) {
    throw new TemplateError('model.path', `${file}: not readable JSON (${(error as Error).message}), so its chat template cannot be read; fix the file or set prompts.chat`);
  }
  return JSON.stringify(template ?? '').includes('<|im_start|>') ? 'chatml' : 'none';
}

/**
 * A scenario's `prompts` resolved for the record (undefined for a domain without templates); `scenarioFile`
 * locates a prompts file. Throws TemplateError naming the field.
 */
export function resolvePrompts(domain: Domain, given: unknown, scenarioFile: string, model: { path: string } | { preset: string }): ScenarioPrompts | undefined {
  const catalog = domain.prompts;
  if (catalog === null) {
    if (given !== undefined) throw new TemplateError('prompts', `the ${domain.name} domain writes fixed prompts and takes no templates; remove "prompts"`);
    return undefined;
  }
  let mapping: Record<string, unknown> = {};
  let where = '';
  if (typeof given === 'string') {
    const file = resolve(dirname(scenarioFile), given);
    if (!existsSync(file)) throw new TemplateError('prompts', `the prompts file ${file} does not exist (a path is taken relative to the scenario's folder)`);
    const parsed: unknown = parse(readFileSync(file, 'utf8'));
    if (!isMapping(parsed)) throw new TemplateError('prompts', `${file} holds no mapping of templates (expected e.g. "code_o: { solve: ... }")`);
    [mapping, where] = [parsed, ` (in ${file})`];
  } else if (isMapping(given)) {
    mapping = given;
  } else if (given !== undefined) {
    throw new TemplateError('prompts', 'expected a mapping of templates, or the path of a YAML file holding one');
  }
  const field = (name: string) => `prompts.${name}${where}`;
  const style = mapping.style ?? (isRealModel(model) ? catalog.defaultStyle.real : catalog.defaultStyle.toy);
  if (typeof style !== 'string' || !(style in catalog.styles)) throw new TemplateError(field('style'), `expected one of ${Object.keys(catalog.styles).join(', ')}`);
  const chat = mapping.chat ?? chatOf(model);
  if (!CHAT_FORMATS.includes(chat as ChatFormat)) throw new TemplateError(field('chat'), `expected one of ${CHAT_FORMATS.join(', ')}`);
  overridesOf(catalog, mapping, field);
  return { ...mapping, style, chat: chat as ChatFormat };
}

/** The templates a run uses: its style's, with the scenario's overrides (already checked by resolvePrompts); a scenario built without them gets the toy style. */
export function promptSet(domain: Domain, prompts: ScenarioPrompts | undefined): PromptSet | null {
  const catalog = domain.prompts;
  if (catalog === null) return null;
  if (prompts === undefined) return { templates: catalog.styles[catalog.defaultStyle.toy]!, chat: 'none' };
  const overrides = overridesOf(catalog, prompts, (name) => `prompts.${name}`);
  return { templates: { ...catalog.styles[prompts.style], ...overrides }, chat: prompts.chat };
}

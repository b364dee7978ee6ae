// The code domain's prompt templates: the plain style reproduces the prompts the domain wrote before templates
// (the old functions are kept below as the reference), Absolute Zero Reasoner's style fills every slot of its
// text, a scenario's own templates (inline or in a file beside it) are checked at load and refused by field when
// they name an unknown slot or lack a required one, the defaults follow the model, and AZR's answer format
// (<think>, <answer>, a code_f proposal of inputs and a message for a program the prompt shows) parses and
// validates in the sandbox.

import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PromptSet } from '../src/domains/domain.js';
import { checkTemplate, fill, finishPrompt, promptSet } from '../src/domains/prompts.js';
import { PythonExecutor } from '../src/domains/python/executor.js';
import { python as codeDomain } from '../src/domains/python/index.js';
import { CODE_PROMPTS, PLAIN_PROMPTS, proposalGiven, proposalPrompt, solvePrompt } from '../src/domains/python/prompts.js';
import { answerOf, CODE_TASK_TYPES, parseInputs, parseMessage, parseProgram, parseValue, SEED_TASKS, validateProposal, type CodeTask, type CodeTaskType } from '../src/domains/python/tasks.js';
import { loadScenario, parseScenario } from '../src/scenario/scenario.js';

const fence = (tag: string, body: string) => `\`\`\`${tag}\n${body}\n\`\`\``;

// The domain's prompts before templates (src/domains/python/tasks.ts at c668424), word for word: the reference
// the plain style must reproduce.
const before = {
  proposal(type: CodeTaskType, references: readonly CodeTask[]): string {
    const showTask = (task: CodeTask) => [fence('python', task.program), ...task.inputs.map((input) => fence('input', input))].join('\n');
    const wanted = type === 'code_f' ? '4 to 8 inputs' : 'one input';
    const shown = references.map((task, i) => `## Reference ${i + 1}\n${showTask(task)}`).join('\n');
    return `${shown}\n## New ${type} task: a deterministic function f in a python block, then ${wanted}, each in an input block.\n`;
  },
  solve(task: CodeTask): string {
    if (task.type === 'code_o') return `${fence('python', task.program)}\n${fence('input', task.inputs[0]!)}\n## Output of f(input):\n`;
    if (task.type === 'code_i') return `${fence('python', task.program)}\n${fence('output', task.outputs[0]!)}\n## An input giving this output:\n`;
    const pairs = task.inputs.slice(0, Math.ceil(task.inputs.length / 2)).map((input, i) => `f(${input}) == ${task.outputs[i]}`);
    return `${pairs.join('\n')}\n## A function f in a python block matching these and more:\n`;
  },
};

const AZR: PromptSet = { templates: CODE_PROMPTS.styles.azr!, chat: 'none' };
const [codeO, codeI, codeF] = SEED_TASKS as CodeTask[];

describe('the plain prompts', () => {
  it('are the prompts the domain wrote before templates, for every type and number of references', () => {
    for (const type of CODE_TASK_TYPES) {
      for (let n = 0; n <= SEED_TASKS.length; n++) {
        const references = (SEED_TASKS as CodeTask[]).slice(0, n);
        expect(proposalPrompt(type, references)).toBe(before.proposal(type, references));
        expect(proposalGiven(type, references)).toBe(''); // the plain proposal asks for the program too
      }
    }
    for (const task of SEED_TASKS as CodeTask[]) expect(solvePrompt(task)).toBe(before.solve(task));
    const odd: CodeTask = { ...codeF!, inputs: ['1', '2', '3', '4', '5'], outputs: ['1', '2', '3', '4', '5'] }; // 3 of 5 pairs shown
    expect(solvePrompt(odd)).toBe(before.solve(odd));
    // and by hand, one of them
    expect(solvePrompt(codeO!)).toBe("```python\ndef f(numbers, k):\n    return sorted(numbers)[-k:]\n```\n```input\n[5, 1, 4, 2], 2\n```\n## Output of f(input):\n");
  });

  it('are what a scenario on a preset model resolves to, and the domain hands out', () => {
    const scenario = parseScenario('name: p\nseed: 1\nsteps: 1\nmodel: { preset: tiny }\ndomain: python\npopulation: { subpopulations: 2 }\nsampling: { maxTokens: 64 }\n', 'p.yaml');
    expect(scenario.prompts).toEqual({ style: 'plain', chat: 'none' });
    const prompts = promptSet(codeDomain, scenario.prompts);
    expect(prompts).toEqual(PLAIN_PROMPTS);
    expect(codeDomain.proposalPrompt('code_f', [codeF!], prompts)).toEqual({ prompt: before.proposal('code_f', [codeF!]), given: '' });
  });
});

describe("Absolute Zero Reasoner's prompts", () => {
  const noSlotLeft = (text: string) => expect(text).not.toMatch(/\{\{\s*\w+\s*\}\}/);

  it('fill every slot: references as AZR shows them, the instruction around the prompt', () => {
    const prompt = proposalPrompt('code_o', [codeO!, codeI!], AZR);
    noSlotLeft(prompt);
    expect(prompt.startsWith('A conversation between User and Assistant.')).toBe(true);
    expect(prompt.endsWith('\nAssistant: <think>')).toBe(true);
    expect(prompt).toContain('User: \n## Task: Create a New Python Code Snippet');
    expect(prompt).toContain(`### Reference Code Snippets:\n<snippet_0>\n${fence('python', codeO!.program)}\n${fence('input', codeO!.inputs[0]!)}\n${fence('output', codeO!.outputs[0]!)}\n</snippet_0>\n<snippet_1>\n${fence('python', codeI!.program)}`);
    expect(prompt).toContain("```input\n'John', {'age': 20, 'city': 'New York'}\n```"); // Python's doubled braces undone
    expect(proposalGiven('code_o', [codeO!], AZR)).toBe('');

    const solve = solvePrompt(codeI!, AZR);
    noSlotLeft(solve);
    expect(solve).toContain(`# Code Snippet:\n${fence('python', codeI!.program)}\n\n# Output:\n${fence('output', codeI!.outputs[0]!)}`);
    expect(solve).not.toContain(codeI!.inputs[0]!); // the answer stays hidden
  });

  it('ask a code_f teacher for inputs to a reference program, which the proposal then has', () => {
    const prompt = proposalPrompt('code_f', [codeI!, codeO!], AZR);
    noSlotLeft(prompt);
    expect(prompt).toContain('## Task: Output 8 Inputs that can be plugged into the following Code Snippet');
    expect(prompt).toContain(`### Code Snippet:\n\`\`\`python\n${codeI!.program}\nf(<|YOUR INPUT WILL BE PLUGGED HERE|>)\n\`\`\``);
    expect(prompt).not.toContain(codeO!.program); // one reference, as AZR's code_f
    expect(proposalGiven('code_f', [codeI!, codeO!], AZR)).toBe(fence('python', codeI!.program));
    expect(proposalGiven('code_f', [], AZR)).toBe('');

    const task: CodeTask = { ...codeF!, message: 'sums the digits' };
    const solve = solvePrompt(task, AZR);
    noSlotLeft(solve);
    expect(solve).toContain('# Input and Output Pairs:\n```input_0\n7\n```\n```output_0\n7\n```\n```input_1\n42\n```\n```output_1\n6\n```\n\n\n# Message:\n```message\nsums the digits\n```');
    expect(solve).not.toContain('305'); // the held-out pairs
  });

  it('put the prompt in ChatML when the chat format says so', () => {
    expect(finishPrompt({ templates: { wrap: '[{{prompt}}]' }, chat: 'chatml' }, 'hi')).toBe('<|im_start|>user\n[hi]<|im_end|>\n<|im_start|>assistant\n');
    expect(finishPrompt({ templates: {}, chat: 'none' }, 'hi')).toBe('hi');
  });
});

describe('templates', () => {
  it('of both built-in styles: every template there, each within its slots and with the required ones', () => {
    for (const [style, templates] of Object.entries(CODE_PROMPTS.styles)) {
      expect(Object.keys(templates).sort(), style).toEqual(Object.keys(CODE_PROMPTS.templates).sort());
      for (const [name, text] of Object.entries(templates)) expect(() => checkTemplate(CODE_PROMPTS, name, text, name), `${style} ${name}`).not.toThrow();
    }
  });

  it('fill in one pass: a value that looks like a slot stays as written', () => {
    expect(fill('a {{x}} b {{ y }}', { x: '{{y}}', y: '2' })).toBe('a {{y}} b 2');
    expect(fill("{'age': 20} {{ not a slot", {})).toBe("{'age': 20} {{ not a slot");
  });

  const code = (prompts: string) => `name: c\nseed: 1\nsteps: 1\nmodel: { preset: tiny }\ndomain: python\npopulation: { subpopulations: 2 }\nsampling: { maxTokens: 64 }\nprompts: ${prompts}\n`;

  it('of a scenario: checked at load, refused by field when a slot is unknown or a required one missing', () => {
    const cases: Array<[string, RegExp]> = [
      ['{ code_o: { solve: "{{program}} {{input}} {{foo}}" } }', /^c\.yaml: field "prompts\.code_o\.solve": unknown slot \{\{foo\}\} \(this template's slots: program, input, task_type\)$/],
      ['{ code_o: { solve: "{{program}} {{input}} {{output}}" } }', /field "prompts\.code_o\.solve": unknown slot \{\{output\}\}/], // it would give the answer away
      ['{ code_i: { solve: "{{program}}" } }', /field "prompts\.code_i\.solve": the template lacks \{\{output\}\}/],
      ['{ pair: "{{input}}" }', /field "prompts\.pair": the template lacks \{\{output\}\}/],
      ['{ wrap: "hello" }', /field "prompts\.wrap": the template lacks \{\{prompt\}\}/],
      ['{ code_x: { solve: "x" } }', /field "prompts\.code_x\.solve": unknown template \(the templates are reference, pair, wrap, code_o\.proposal/],
      ['{ code_o: { solve: 3 } }', /field "prompts\.code_o\.solve": expected the template as text/],
      ['{ style: fancy }', /field "prompts\.style": expected one of plain, azr/],
      ['{ chat: llama3 }', /field "prompts\.chat": expected one of none, chatml/],
      ['[1, 2]', /field "prompts": expected a mapping of templates, or the path of a YAML file holding one/],
      ['{ style: azr }', /field "prompts": a \d+-token prompt leaves no room for an answer in the model's 2048-token context; use shorter prompts \(prompts\.style: plain\)/], // AZR's on a preset
      ['missing-prompts.yaml', /field "prompts": the prompts file .*missing-prompts\.yaml does not exist/],
    ];
    for (const [prompts, error] of cases) expect(() => parseScenario(code(prompts), 'c.yaml'), prompts).toThrow(error);
    expect(() => parseScenario('name: a\nseed: 1\nsteps: 1\nmodel: { preset: tiny }\npopulation: { subpopulations: 2 }\nprompts: { wrap: "{{prompt}}" }\n', 'a.yaml')).toThrow(/^a\.yaml: field "prompts": the arith domain writes fixed prompts and takes no templates/);
  });

  it('of a scenario: used over the style, and read from a file beside the scenario, inlined in the record', () => {
    const scenario = parseScenario(code('{ code_o: { solve: "Q {{program}} / {{input}}" } }'), 'c.yaml');
    const prompts = promptSet(codeDomain, scenario.prompts)!;
    expect(solvePrompt(codeO!, prompts)).toBe(`Q ${codeO!.program} / ${codeO!.inputs[0]}`);
    expect(solvePrompt(codeI!, prompts)).toBe(before.solve(codeI!)); // the others stay the style's

    const dir = mkdtempSync(join(tmpdir(), 'populora-prompts-'));
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'mine.yaml'), 'chat: chatml\ncode_i:\n  solve: "{{program}} gives {{output}}"\n');
    writeFileSync(join(dir, 'sub', 'bad.yaml'), 'code_i:\n  solve: "{{program}}"\n');
    writeFileSync(join(dir, 'sub', 's.yaml'), code('mine.yaml'));
    writeFileSync(join(dir, 'sub', 'b.yaml'), code('bad.yaml'));
    const fromFile = loadScenario(join(dir, 'sub', 's.yaml'));
    expect(fromFile.prompts).toEqual({ style: 'plain', chat: 'chatml', code_i: { solve: '{{program}} gives {{output}}' } });
    expect(solvePrompt(codeI!, promptSet(codeDomain, fromFile.prompts)!)).toBe(`<|im_start|>user\n${codeI!.program} gives ${codeI!.outputs[0]}<|im_end|>\n<|im_start|>assistant\n`);
    // The record parses to itself: a replay from scenario.json needs no file.
    expect(parseScenario(JSON.stringify(fromFile), 'scenario.json').prompts).toEqual(fromFile.prompts);
    expect(() => loadScenario(join(dir, 'sub', 'b.yaml'))).toThrow(/field "prompts\.code_i\.solve \(in .*bad\.yaml\)": the template lacks \{\{output\}\}/);
  });

  it('default by the model: plain for a preset or a model pretrained here, AZR (and ChatML if its tokenizer says so) for a real one', () => {
    const arithTiny = 'models/arith-tiny'; // pretrained here: pretrain_log.json
    const real = mkdtempSync(join(tmpdir(), 'populora-real-model-'));
    for (const file of ['model.safetensors', 'tokenizer.json']) copyFileSync(join(arithTiny, file), join(real, file));
    writeFileSync(join(real, 'config.json'), JSON.stringify({ ...JSON.parse(readFileSync(join(arithTiny, 'config.json'), 'utf8')), max_position_embeddings: 4096 }));
    const withModel = (path: string) => `name: m\nseed: 1\nsteps: 1\nmodel: { path: ${path} }\ndomain: python\npopulation: { subpopulations: 2 }\nsampling: { maxTokens: 256 }\n`;
    expect(parseScenario(withModel(arithTiny), 'm.yaml').prompts).toEqual({ style: 'plain', chat: 'none' });
    expect(parseScenario(withModel(real), 'm.yaml').prompts).toEqual({ style: 'azr', chat: 'none' });
    writeFileSync(join(real, 'tokenizer_config.json'), JSON.stringify({ chat_template: "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" }));
    expect(parseScenario(withModel(real), 'm.yaml').prompts).toEqual({ style: 'azr', chat: 'chatml' });
    writeFileSync(join(real, 'tokenizer_config.json'), JSON.stringify({ chat_template: '{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>{% endfor %}' }));
    expect(parseScenario(withModel(real), 'm.yaml').prompts).toEqual({ style: 'azr', chat: 'none' }); // not ChatML: not applied
  });
});

describe("AZR's answer format", () => {
  let sandbox: PythonExecutor;
  beforeAll(async () => {
    sandbox = await PythonExecutor.load();
  });
  afterAll(() => sandbox?.close());

  it('is read from the <answer>, not from what the thinking drafted', () => {
    const text = `Let me try ${fence('python', 'def f(x):\n    return 0')} first.</think> <answer>${fence('python', 'def f(x):\n    return x + 1')}\n${fence('input', '4')}</answer>`;
    expect(answerOf(text)).toBe(`${fence('python', 'def f(x):\n    return x + 1')}\n${fence('input', '4')}`);
    expect(parseProgram(text)).toBe('def f(x):\n    return x + 1');
    expect(parseInputs(text)).toEqual(['4']);
    expect(parseValue(`a guess ${fence('output', '1')}</think><answer>\n${fence('output', "{'a': 2}")}\n</answer>`, 'output')).toBe("{'a': 2}");
    expect(parseValue('thinking...</think> 42', 'output')).toBe('42'); // no answer tags: what follows the thinking
    expect(parseValue(`<answer>${fence('input', "'ab', 3")}`, 'input')).toBe("'ab', 3"); // cut off before </answer>
    expect(parseValue('[1, 2]', 'output')).toBe('[1, 2]'); // no tags at all: as before
  });

  it('makes a code_f task of the shown program, the teacher\'s inputs and its message', () => {
    const given = proposalGiven('code_f', [codeI!], AZR);
    const text = `plan...</think>\n<answer>\n${['banana', 'aab', 'zzy', 'abcabc'].map((w) => fence('input', `'${w}'`)).join('\n')}\n${fence('message', 'the most frequent letter')}\n</answer>`;
    const validation = validateProposal(sandbox, 'code_f', text, undefined, given);
    if (!validation.valid) throw new Error(validation.reason);
    const task = validation.task;
    expect(task.program).toBe(codeI!.program);
    expect(task.inputs).toEqual(["'banana'", "'aab'", "'zzy'", "'abcabc'"]);
    expect(task.outputs).toEqual(["'a'", "'a'", "'z'", "'a'"]); // worked out by hand: max by count, ties to the first seen
    expect(task.message).toBe('the most frequent letter');
    expect(parseMessage(text)).toBe('the most frequent letter');
    // Without the given program the same text has none: a format error.
    const alone = validateProposal(sandbox, 'code_f', text);
    expect(alone.valid ? 'valid' : alone.reason).toMatch(/^format: no program/);
  });
});

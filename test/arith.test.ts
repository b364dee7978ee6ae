// The toy domain: the evaluator against Python itself, the grammar mask as a property (every masked sample is
// well-formed and finishes within its budget), and validation and answer checking on hand-computed cases.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ExprError, evaluate, parseExpr, printExpr, signatureOf, sizeOf, depthOf, LIMITS, type BinaryOp, type Expr } from '../src/domains/arith/expr.js';
import { isComplete, scan, tokenMask, type Format, type TokenTexts } from '../src/domains/arith/grammar.js';
import { answerFormat, checkAnswer, proposalFormat, solvePrompt, taskMetrics, validateProposal, ARITH_TASK_TYPES } from '../src/domains/arith/tasks.js';
import { ArithVerifierPool } from '../src/domains/arith/verifier-pool.js';
import { verifyArith } from '../src/domains/arith/verify-jobs.js';
import type { VerifyJob } from '../src/domains/domain.js';
import { teacherReward } from '../actors/teacher.js';
import { Streams } from '../src/runtime/streams.js';
import { ARITH_ALPHABET, CHAR_SPECIALS } from '../src/model/tokenizer.js';

const OPS: BinaryOp[] = ['+', '-', '*', '//', '%'];

function randomExpr(next: () => number, depth: number): Expr {
  const r = next();
  if (depth <= 1 || r < 0.3) return r < 0.15 ? { kind: 'var' } : { kind: 'num', value: Math.floor(next() * (next() < 0.5 ? 10 : 1000)) };
  return { kind: 'bin', op: OPS[Math.floor(next() * OPS.length)]!, left: randomExpr(next, depth - 1), right: randomExpr(next, depth - 1) };
}

describe('arith expressions', () => {
  it('evaluate as Python does (floor division and remainder signs), errors included', () => {
    const rng = new Streams(11).stream('exprs');
    const cases: Array<{ text: string; x: number }> = [];
    while (cases.length < 300) {
      const text = printExpr(randomExpr(() => rng.next(), 5));
      if (text.length <= LIMITS.length) cases.push({ text, x: rng.int(41) - 20 });
    }
    const script = `import json,sys
out=[]
for c in json.load(sys.stdin):
    try:
        v=eval(c['text'].replace('x','(%d)'%c['x']))
        out.append(v if abs(v)<=${LIMITS.valueAbs} else 'big')
    except ZeroDivisionError:
        out.append('zero')
print(json.dumps(out))`;
    const python = spawnSync('python3', ['-c', script], { input: JSON.stringify(cases), encoding: 'utf8' });
    expect(python.status, `python3 is needed as the reference evaluator: ${python.stderr}`).toBe(0);
    const expected = JSON.parse(python.stdout) as Array<number | string>;
    let compared = 0;
    cases.forEach((c, i) => {
      let ours: number | string;
      try {
        ours = evaluate(parseExpr(c.text), c.x).value;
      } catch (error) {
        ours = (error as ExprError).reason === 'division-by-zero' ? 'zero' : 'big';
      }
      // Python has no bound on intermediates; ours overflow early, so only compare where neither is out of range.
      if (ours !== 'big' && expected[i] !== 'big') {
        expect(ours, `${c.text} at x=${c.x}`).toBe(expected[i]);
        compared++;
      }
    });
    expect(compared).toBeGreaterThan(200);
  });

  it('print with the fewest parentheses, parse back to the same tree, and measure size, depth and shape', () => {
    const rng = new Streams(12).stream('round-trip');
    for (let i = 0; i < 200; i++) {
      const e = randomExpr(() => rng.next(), 5);
      if (printExpr(e).length <= LIMITS.length) expect(parseExpr(printExpr(e))).toEqual(e);
    }
    const e = parseExpr('(x+3)*(x-(2-x))%7');
    expect(printExpr(e)).toBe('(x+3)*(x-(2-x))%7');
    expect([sizeOf(e), depthOf(e), signatureOf(e)]).toEqual([11, 5, '(x+n)*(x-(n-x))%n']);
    expect(printExpr(parseExpr('((1+2))+(3+4)'))).toBe('1+2+(3+4)');
  });

  it('reject malformed text, over-long expressions, and bound value and fuel', () => {
    for (const bad of ['1//', '05', '(1', 'x(', '1/2', '', '1++2', '1000']) expect(() => parseExpr(bad), bad).toThrow(ExprError);
    expect(() => evaluate(parseExpr('999*999*999'), 0)).toThrow(/exceeds/);
    expect(() => evaluate(parseExpr('x%(x-x)'), 3)).toThrow(/by zero/);
    expect(() => evaluate(parseExpr('x+x+x+x'), 1, 5)).toThrow(/more than 5 steps/);
  });
});

describe('arith grammar mask', () => {
  const texts = ['<pad>', '<bos>', '<eos>', ...[...new Set(ARITH_ALPHABET)]].map((t) => (CHAR_SPECIALS.includes(t) ? '' : t));
  const vocab: TokenTexts = { texts, eos: 2 };

  function sampleUnderMask(format: Format, budget: number, draw: () => number): string {
    let text = '';
    for (let generated = 0; ; generated++) {
      const mask = tokenMask(format, vocab, text, budget - generated);
      const allowed = texts.map((_, id) => id).filter((id) => (mask[id >>> 5]! >>> (id & 31)) & 1);
      expect(allowed.length, `nothing allowed after ${JSON.stringify(text)}`).toBeGreaterThan(0);
      const id = allowed[Math.floor(draw() * allowed.length)]!;
      if (id === vocab.eos) return text;
      text += texts[id];
      expect(generated + 1, 'the budget was overrun').toBeLessThan(budget);
    }
  }

  it('lets every random walk finish a well-formed sentence within its token budget', () => {
    const rng = new Streams(5).stream('walks');
    for (let i = 0; i < 150; i++) {
      const type = ARITH_TASK_TYPES[i % 3]!;
      const budget = 14 + rng.int(20);
      const proposal = sampleUnderMask(proposalFormat(type), budget, () => rng.next());
      const verdict = validateProposal(type, proposal);
      if (!verdict.valid) expect(verdict.reason, proposal).toMatch(/^(division-by-zero|overflow|too-deep|induce: the inputs must be distinct)/);
      const answer = sampleUnderMask(answerFormat(type), 8 + rng.int(10), () => rng.next());
      expect(scan(answerFormat(type), answer)).not.toBeNull();
      if (verdict.valid) expect(checkAnswer(verdict.task, answer).reason).not.toMatch(/^syntax/);
    }
  });

  it('accepts exactly the viable prefixes and the complete sentences', () => {
    const format = proposalFormat('induce');
    expect(isComplete(format, scan(format, 'x*2;1,-2,3,40,-999')!)).toBe(true);
    expect(isComplete(format, scan(format, 'x*2;1,-2,3')!)).toBe(false);
    for (const bad of ['x*2;01', 'x*2;-0', 'x*2;1,,', 'x2', '(x;', 'x*2;1000']) expect(scan(format, bad), bad).toBeNull();
    // A budget of 3 tokens after "x*(": one must close the parenthesis (")" then EOS), so only an operand fits.
    const mask = tokenMask([{ kind: 'expr' }], vocab, 'x*(', 3);
    const allowed = texts.filter((_, id) => (mask[id >>> 5]! >>> (id & 31)) & 1);
    expect(allowed.sort()).toEqual([...'0123456789x'].sort());
  });
});

describe('arith tasks', () => {
  it('validate proposals and compute their answers (hand-computed)', () => {
    expect(validateProposal('deduce', 'x*2+1;3')).toMatchObject({ valid: true, task: { expr: 'x*2+1', inputs: [3], outputs: [7] } });
    expect(validateProposal('abduce', 'x%3;-4')).toMatchObject({ valid: true, task: { outputs: [2] } }); // Python: -4 % 3 == 2
    expect(validateProposal('deduce', '7//(x-1);1')).toMatchObject({ valid: false, reason: expect.stringMatching(/^division-by-zero/) });
    expect(validateProposal('induce', 'x;1,2,2,3,4')).toMatchObject({ valid: false, reason: expect.stringMatching(/distinct/) });
    expect(validateProposal('induce', 'x;1,2')).toMatchObject({ valid: false, reason: expect.stringMatching(/needs 5 input/) });
    const induce = validateProposal('induce', 'x*x-1;0,1,2,3,-3');
    expect(induce).toMatchObject({ valid: true, task: { outputs: [-1, 0, 3, 8, 8] } });
    if (!induce.valid) return;
    expect(solvePrompt(induce.task)).toBe('0:-1,1:0,2:3;??\n');
    expect(taskMetrics(induce.task)).toEqual({ size: 5, depth: 3, operators: ['*', '-'], signature: 'induce:x*x-n' });
  });

  it('check answers: any preimage for abduce, every pair (held-out too) for induce', () => {
    const abduce = validateProposal('abduce', 'x%3;4');
    const induce = validateProposal('induce', 'x*x-1;0,1,2,3,-3');
    const deduce = validateProposal('deduce', '(x+3)//2;-6');
    if (!abduce.valid || !induce.valid || !deduce.valid) throw new Error('fixtures must be valid');
    expect(deduce.task.outputs).toEqual([-2]); // floor(-3 / 2)
    expect(checkAnswer(deduce.task, '-2').correct).toBe(true);
    expect(checkAnswer(deduce.task, '-1').correct).toBe(false);
    expect(checkAnswer(abduce.task, '7').correct).toBe(true); // 7 % 3 == 1 == 4 % 3
    expect(checkAnswer(abduce.task, '5').correct).toBe(false);
    expect(checkAnswer(induce.task, 'x*x-1').correct).toBe(true);
    expect(checkAnswer(induce.task, '(x-1)*(x+1)').correct).toBe(true);
    expect(checkAnswer(induce.task, 'x*x*x-1')).toMatchObject({ correct: false, reason: expect.stringMatching(/^shown/) });
    expect(checkAnswer(induce.task, '(x+1)*(x*x-x+x*x+1)%(x*x+1)+x*x-1-x-1+x*x%1')).toMatchObject({ correct: false });
  });

  it('give the verifier the same verdicts in order whatever the number of workers', async () => {
    const jobs: VerifyJob[] = [];
    const rng = new Streams(9).stream('jobs');
    for (let i = 0; i < 60; i++) {
      const text = `${printExpr(randomExpr(() => rng.next(), 4))};${rng.int(21) - 10}`;
      jobs.push({ kind: 'validate', taskType: 'deduce', text });
      const v = validateProposal('deduce', text);
      if (v.valid) jobs.push({ kind: 'check', task: v.task, answer: String(rng.int(5)) });
    }
    const expected = jobs.map(verifyArith);
    for (const workers of [1, 3]) {
      const pool = new ArithVerifierPool(workers);
      try {
        expect(await pool.verify(jobs)).toEqual(expected);
      } finally {
        await pool.close();
      }
    }
  });
});

describe('teacher rewards', () => {
  it('learnability 1 - solve rate, 0 when nobody solved (AZR) unless told otherwise, a penalty when invalid', () => {
    const rewards = { invalidPenalty: -1, zeroAtUnsolved: true };
    expect(teacherReward(false, null, rewards)).toBe(-1);
    expect(teacherReward(true, 0.25, rewards)).toBe(0.75);
    expect(teacherReward(true, 1, rewards)).toBe(0);
    expect(teacherReward(true, 0, rewards)).toBe(0);
    expect(teacherReward(true, 0, { ...rewards, zeroAtUnsolved: false })).toBe(1);
    expect(teacherReward(true, null, rewards)).toBe(0);
  });
});

// The toy domain's expressions: integers over + - * // % with parentheses and one variable x, with Python's
// semantics (floor division and a remainder with the divisor's sign). Evaluation is bounded by counted work
// (fuel), depth and value size, never by time (DESIGN.md rule 5).
//
//   expr   := term (("+" | "-") term)*
//   term   := factor (("*" | "//" | "%") factor)*
//   factor := number | "x" | "(" expr ")"        number: 0 or 1-3 digits without a leading zero
//
// No spaces, no unary minus: negative values come from subtraction. A printed expression parses back to itself.

export type BinaryOp = '+' | '-' | '*' | '//' | '%';

export type Expr = { kind: 'num'; value: number } | { kind: 'var' } | { kind: 'bin'; op: BinaryOp; left: Expr; right: Expr };

export const LIMITS = {
  numberDigits: 3, // literal constants 0..999
  valueAbs: 999_999, // every intermediate value stays within ±valueAbs (exact in float64, products < 2^53)
  depth: 10, // AST depth
  fuel: 256, // evaluation steps (one per node visited)
  length: 48, // characters of an expression
} as const;

const PRECEDENCE: Record<BinaryOp, number> = { '+': 1, '-': 1, '*': 2, '//': 2, '%': 2 };

export class ExprError extends Error {
  constructor(
    readonly reason: 'syntax' | 'too-long' | 'too-deep' | 'division-by-zero' | 'overflow' | 'out-of-fuel',
    message: string,
  ) {
    super(message);
  }
}

/** Parses an expression in the grammar above; throws ExprError('syntax' | 'too-long' | 'too-deep'). */
export function parseExpr(text: string): Expr {
  if (text.length > LIMITS.length) throw new ExprError('too-long', `expression of ${text.length} characters (at most ${LIMITS.length})`);
  let at = 0;
  const fail = (what: string): never => {
    throw new ExprError('syntax', `${what} at column ${at + 1} of ${JSON.stringify(text)}`);
  };
  const peekOp = (): BinaryOp | null => {
    if (text.startsWith('//', at)) return '//';
    const c = text[at];
    return c === '+' || c === '-' || c === '*' || c === '%' ? c : null;
  };
  const binaryLevel = (level: number, operand: () => Expr): Expr => {
    let left = operand();
    for (let op = peekOp(); op !== null && PRECEDENCE[op] === level; op = peekOp()) {
      at += op.length;
      left = { kind: 'bin', op, left, right: operand() };
    }
    return left;
  };
  const factor = (): Expr => {
    const c = text[at];
    if (c === 'x') {
      at++;
      return { kind: 'var' };
    }
    if (c === '(') {
      at++;
      const inner = expr();
      if (text[at] !== ')') fail('expected ")"');
      at++;
      return inner;
    }
    const digits = /^[0-9]+/.exec(text.slice(at))?.[0];
    if (digits === undefined) fail('expected a number, "x" or "("');
    if (digits!.length > LIMITS.numberDigits || (digits!.length > 1 && digits![0] === '0')) fail(`number ${digits} is not 0..999 without leading zeros`);
    at += digits!.length;
    return { kind: 'num', value: Number(digits) };
  };
  const expr = (): Expr => binaryLevel(1, () => binaryLevel(2, factor));
  const tree = expr();
  if (at !== text.length) fail('unexpected character');
  if (depthOf(tree) > LIMITS.depth) throw new ExprError('too-deep', `expression depth ${depthOf(tree)} exceeds ${LIMITS.depth}`);
  return tree;
}

/** Prints with the fewest parentheses that keep the tree (left-associative operators). */
export function printExpr(e: Expr, numbers: 'values' | 'placeholders' = 'values'): string {
  if (e.kind === 'num') return numbers === 'values' ? String(e.value) : 'n';
  if (e.kind === 'var') return 'x';
  const wrap = (child: Expr, needs: boolean) => (needs ? `(${printExpr(child, numbers)})` : printExpr(child, numbers));
  const p = PRECEDENCE[e.op];
  const left = wrap(e.left, e.left.kind === 'bin' && PRECEDENCE[e.left.op] < p);
  const right = wrap(e.right, e.right.kind === 'bin' && PRECEDENCE[e.right.op] <= p);
  return `${left}${e.op}${right}`;
}

/** Python's floor division and remainder (the remainder takes the divisor's sign). */
export function floorDiv(a: number, b: number): number {
  return Math.floor(a / b);
}
export function pyMod(a: number, b: number): number {
  return a - b * Math.floor(a / b);
}

/** Evaluates at x; throws ExprError on division by zero, a value beyond ±valueAbs, or running out of fuel. */
export function evaluate(e: Expr, x: number, fuel: number = LIMITS.fuel): { value: number; fuelUsed: number } {
  let used = 0;
  const check = (v: number) => {
    if (Math.abs(v) > LIMITS.valueAbs) throw new ExprError('overflow', `a value (${v}) exceeds ±${LIMITS.valueAbs}`);
    return v;
  };
  const visit = (node: Expr): number => {
    if (++used > fuel) throw new ExprError('out-of-fuel', `evaluation needs more than ${fuel} steps`);
    if (node.kind === 'num') return node.value;
    if (node.kind === 'var') return check(x);
    const a = visit(node.left);
    const b = visit(node.right);
    switch (node.op) {
      case '+':
        return check(a + b);
      case '-':
        return check(a - b);
      case '*':
        return check(a * b);
      case '//':
      case '%':
        if (b === 0) throw new ExprError('division-by-zero', `${node.op} by zero`);
        return check(node.op === '//' ? floorDiv(a, b) : pyMod(a, b));
    }
  };
  const value = visit(e);
  return { value: value === 0 ? 0 : value, fuelUsed: used }; // no -0: values are compared and printed as integers
}

export function sizeOf(e: Expr): number {
  return e.kind === 'bin' ? 1 + sizeOf(e.left) + sizeOf(e.right) : 1;
}

export function depthOf(e: Expr): number {
  return e.kind === 'bin' ? 1 + Math.max(depthOf(e.left), depthOf(e.right)) : 1;
}

/** The distinct operators used, sorted. */
export function operatorsOf(e: Expr): BinaryOp[] {
  const ops = new Set<BinaryOp>();
  const visit = (node: Expr) => {
    if (node.kind !== 'bin') return;
    ops.add(node.op);
    visit(node.left);
    visit(node.right);
  };
  visit(e);
  return [...ops].sort();
}

/** The expression's shape: its canonical print with every constant replaced by "n" (coverage bins). */
export function signatureOf(e: Expr): string {
  return printExpr(e, 'placeholders');
}

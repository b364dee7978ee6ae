// Text as tokens arrive. A byte-level BPE token (Qwen's, Llama 3's) can end in the middle of a UTF-8 character, so
// StreamingDecoder hands out only settled text; StopStrings ends a generation once its text contains a stop string
// (the text excludes it, as OpenAI's `stop` does); generateText runs generate() with both, one pair per request.

import { generate, type GenerateOptions, type GenerationRequest, type GenerationResult } from './generate.js';
import type { LlamaModel } from './llama.js';
import type { TextTokenizer } from './tokenizer.js';

const REPLACEMENT = '\uFFFD'; // what an incomplete UTF-8 sequence decodes to, until its next bytes arrive

/**
 * Decodes a token stream piece by piece: push(token) returns the new text up to any trailing U+FFFD (an unfinished
 * character, which the next token may complete), finish() the rest. Their concatenation is decode(all tokens).
 * It decodes a window, not the whole sequence: the unsettled tokens and one settled token before them, since a
 * SentencePiece decoder drops the leading space of a sequence's first token.
 */
export class StreamingDecoder {
  private readonly tokens: number[] = [];
  private windowStart = 0;
  private emitted = 0; // UTF-16 units of decode(tokens[windowStart..]) already handed out

  constructor(private readonly tokenizer: Pick<TextTokenizer, 'decode'>) {}

  push(token: number): string {
    this.tokens.push(token);
    const text = this.windowText();
    let settled = text.length;
    while (settled > this.emitted && text[settled - 1] === REPLACEMENT) settled--;
    const piece = text.slice(this.emitted, settled);
    this.emitted += piece.length;
    if (settled === text.length) {
      this.windowStart = this.tokens.length - 1;
      this.emitted = this.windowText().length;
    }
    return piece;
  }

  /** The text still held back (a character that never completed decodes to U+FFFD, as in the whole decode). */
  finish(): string {
    const piece = this.windowText().slice(this.emitted);
    this.emitted += piece.length;
    return piece;
  }

  private windowText(): string {
    return this.tokenizer.decode(this.tokens.slice(this.windowStart));
  }
}

/**
 * Watches a stream of text for stop strings. feed(piece) returns what is safe to show: the text before the first
 * stop string, less a tail that may yet become the start of one (held until it cannot); `stopped` says one was
 * seen, after which nothing more is shown. flush() releases the held tail at the end of a stream.
 */
export class StopStrings {
  private held = '';
  stopped = false;

  constructor(private readonly stops: readonly string[]) {
    if (stops.some((s) => s.length === 0)) throw new RangeError('a stop string is empty (it would end every generation at once)');
  }

  feed(piece: string): string {
    if (this.stopped) return '';
    const text = this.held + piece;
    const starts = this.stops.map((s) => text.indexOf(s)).filter((at) => at >= 0);
    if (starts.length > 0) {
      this.stopped = true;
      this.held = '';
      return text.slice(0, Math.min(...starts));
    }
    const keep = this.partialStopAtEnd(text);
    this.held = text.slice(text.length - keep);
    return text.slice(0, text.length - keep);
  }

  flush(): string {
    const rest = this.stopped ? '' : this.held;
    this.held = '';
    return rest;
  }

  /** The length of the longest end of `text` that a stop string starts with (shorter than that stop string). */
  private partialStopAtEnd(text: string): number {
    for (let k = Math.min(text.length, Math.max(0, ...this.stops.map((s) => s.length - 1))); k > 0; k--) {
      const end = text.slice(text.length - k);
      if (this.stops.some((s) => s.length > k && s.startsWith(end))) return k;
    }
    return 0;
  }
}

export interface TextGenerationRequest extends GenerationRequest {
  stopStrings?: readonly string[]; // generation ends once its text contains one; `text` stops before it
}

export interface TextGenerationResult extends GenerationResult {
  text: string; // the decoded completion, cut before a stop string (`tokens` keeps every token generated)
}

export interface GenerateTextOptions extends Omit<GenerateOptions, 'onToken'> {
  /** Each request's text as it settles, in order; the pieces of a request add up to its `text`. */
  onText?: (requestId: number, piece: string) => void;
}

/** generate(), decoding each request's tokens as they arrive and ending a request at its first stop string. */
export async function generateText(model: LlamaModel, tokenizer: Pick<TextTokenizer, 'decode'>, requests: readonly TextGenerationRequest[], options: GenerateTextOptions = {}): Promise<TextGenerationResult[]> {
  const streams = requests.map((r) => ({ decoder: new StreamingDecoder(tokenizer), stops: new StopStrings(r.stopStrings ?? []), text: '' }));
  const streamOf = new Map<GenerationRequest, (typeof streams)[number]>(requests.map((r, i) => [r, streams[i]!]));
  const show = (request: GenerationRequest, piece: string) => {
    if (piece === '') return;
    streamOf.get(request)!.text += piece;
    options.onText?.(request.requestId, piece);
  };
  const onToken = (request: GenerationRequest, token: number) => {
    const { decoder, stops } = streamOf.get(request)!;
    show(request, stops.feed(decoder.push(token)));
    return stops.stopped;
  };
  const results = await generate(model, requests, { ...options, onToken });
  return results.map((result, i) => {
    const { decoder, stops } = streams[i]!;
    show(requests[i]!, stops.feed(decoder.finish()));
    show(requests[i]!, stops.flush());
    return { ...result, text: streams[i]!.text };
  });
}

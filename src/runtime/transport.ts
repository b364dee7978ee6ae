// What carries a message to an actor's handler. The world decides what is delivered and in which order (its
// superstep barrier, world.ts); a transport only carries one message to one named actor and says when its handler
// has run. In-process it is nact, one mailbox per actor; a transport across processes (issue 20: NATS, subjects
// named by actor) plugs in here without the world, the actors or any run's bits changing.

import { dispatch, spawn, start, stop, type Ref } from 'nact';

/** Every message is plain data with a `type` tag. */
export interface Message {
  type: string;
}

export interface Transport {
  /** Starts the actor `name`: `handle` takes its state and a message and returns the next state; it never throws. */
  spawn<State>(name: string, initialState: State, handle: (state: State, message: Message) => State): void;
  has(name: string): boolean;
  /** Carries one message to `to`; resolves once its handler has run. */
  deliver(to: string, message: Message): Promise<void>;
  /**
   * Carries a round's messages at once, their handlers run one at a time in the given order (a transport whose
   * trips cost more than a handler: NATS). Absent: the world delivers them one by one.
   */
  deliverAll?(messages: ReadonlyArray<{ to: string; message: Message }>): Promise<void>;
  close(): void;
}

let systemCount = 0; // names each actor system: nact keeps a process-wide map of them

/** One process: nact actors. Messages are delivered one at a time, so handlers run in the order they are carried. */
export class NactTransport implements Transport {
  // nact names an unnamed system at random; its typings omit the name option.
  private readonly system = start({ name: `populora-${systemCount++}` } as unknown as Parameters<typeof start>[0]);
  private readonly refs = new Map<string, Ref<Message>>();
  private handled: (() => void) | null = null; // resolves the delivery in progress

  spawn<State>(name: string, initialState: State, handle: (state: State, message: Message) => State): void {
    const actor = (state: State, message: Message) => {
      try {
        return handle(state, message);
      } finally {
        this.handled?.();
      }
    };
    this.refs.set(name, spawn(this.system, actor, name, { initialState }) as Ref<Message>);
  }

  has(name: string): boolean {
    return this.refs.has(name);
  }

  deliver(to: string, message: Message): Promise<void> {
    const ref = this.refs.get(to);
    if (!ref) throw new Error(`no actor ${to} to deliver "${message.type}" to`);
    return new Promise<void>((resolve) => {
      this.handled = resolve;
      dispatch(ref, message);
    });
  }

  close(): void {
    for (const ref of this.refs.values()) stop(ref);
    stop(this.system);
  }
}

// The recorder: the actor that appends every message of the run to the event log, in the order the world sent
// them (the world hands it each delivery round's messages as one batch, and its mailbox is FIFO). The step
// barrier flushes the log to disk. It lives with the world, below the simulation's actors: it records their
// messages and takes part in none of them.

import type { EventLog, RunEvent } from './event-log.js';

/** The recorder's one message: events to append to the log, in send order. */
export interface RecordMessage {
  type: 'record';
  events: RunEvent[];
}

/** The recorder's handler; it has no state. */
export const recorderHandler =
  (log: EventLog) =>
  (state: null, message: RecordMessage): null => {
    for (const event of message.events) log.append(event);
    return state;
  };

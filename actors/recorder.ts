// The recorder: appends every message of the run to the event log, in the order the world sent them (the world
// hands it each delivery round's messages as one batch, and its mailbox is FIFO). The step barrier flushes the
// log to disk.

import type { EventLog } from '../src/runtime/event-log.js';
import type { Handler, RecordMessage } from '../src/runtime/world.js';

export type RecorderState = null;
export type RecorderMessage = RecordMessage;

export const recorderHandler =
  (log: EventLog): Handler<RecorderState, RecorderMessage> =>
  (state, message) => {
    for (const event of message.events) log.append(event);
    return state;
  };

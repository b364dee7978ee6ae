// The recorder: appends every message of the run to the event log, in the order the world sent them (its
// mailbox is FIFO and the world hands it each message as it sends it). The step barrier flushes the log to disk.

import type { EventLog } from '../src/runtime/event-log.js';
import type { Handler, RecordMessage } from '../src/runtime/world.js';

export type RecorderState = null;
export type RecorderMessage = RecordMessage;

export const recorderHandler =
  (log: EventLog): Handler<RecorderState, RecorderMessage> =>
  (state, message) => {
    log.append(message.event);
    return state;
  };

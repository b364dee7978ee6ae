// Typed addresses (src/runtime/world.ts, actors/protocol.ts): an address carries the messages its actor takes, so
// `send` refuses at compile time a message the receiver has no case for, and a reply address must take the reply.
// The refusals are checked by `tsc --noEmit` (npm test): each `@ts-expect-error` line below fails the type check
// if it compiles, that is, if a wrong message could reach an actor. At run time an address is the actor's name,
// so the log (and every run hash) records what it recorded before addresses were typed.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENGINE, MATCHMAKER, POPULATION_MANAGER, RUNTIME, studentAt, teacherAt, VERIFIER } from '../actors/protocol.js';
import type { VerifierMessage } from '../actors/verifier.js';
import { EventLog, readEventLog } from '../src/runtime/event-log.js';
import { address, delivery, World, type Handler } from '../src/runtime/world.js';

/** Never run: what the type checker must refuse, beside what it must take. Exported so that it is kept and checked. */
export function typeChecks(world: World, verifierHandler: Handler<null, VerifierMessage>): void {
  const teacher = teacherAt('teacher-0-0');
  const student = studentAt('student-0-0');
  // @ts-expect-error the engine has no case for "propose"
  world.send(RUNTIME, ENGINE, { type: 'propose' });
  // @ts-expect-error a teacher takes "validated" but never "checked"
  world.send(VERIFIER, teacher, { type: 'checked', results: [] });
  // @ts-expect-error a message of the right type with a field its receiver does not read
  world.send(RUNTIME, MATCHMAKER, { type: 'match', tasks: 3 });
  // @ts-expect-error a bare name is not an address
  world.send(RUNTIME, 'engine', { type: 'train', samples: [] });
  // @ts-expect-error a student is no reply address for "validated": it takes no validations
  const wrongReply: VerifierMessage = { type: 'validate', replyTo: student, requests: [] };
  // @ts-expect-error the engine's address, the verifier's handler
  world.actor(ENGINE, null, verifierHandler);
  // @ts-expect-error a delivery is checked as a send is
  delivery(0, POPULATION_MANAGER, { type: 'generated', results: [] });

  // What it takes: a message of the receiver's union, and a reply address of an actor that takes the reply.
  world.send(RUNTIME, teacher, { type: 'propose' });
  world.send(RUNTIME, student, { type: 'learn' });
  const check: VerifierMessage = { type: 'check', replyTo: student, requests: [] };
  world.send(student, VERIFIER, check);
  world.send(teacher, VERIFIER, { type: 'validate', replyTo: teacher, requests: [] });
  world.send(student, VERIFIER, wrongReply); // it was refused where it was made
  world.actor(VERIFIER, null, verifierHandler);
}

describe('typed addresses', () => {
  it('are the actors\' names at run time: the log records plain names, as before addresses were typed', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'populora-addresses-')), 'events.msgpack');
    const world = new World(1, new EventLog(file));
    const echo = address<{ type: 'ping'; n: number }>('echo');
    const heard: number[] = [];
    world.actor(echo, null, (state, message) => {
      heard.push(message.n);
      return state;
    });
    world.send(RUNTIME, echo, { type: 'ping', n: 4 });
    await world.barrier();
    world.endStep();
    world.shutdown();
    expect(heard).toEqual([4]);
    expect(readEventLog(file).events).toEqual([{ step: 0, actor: 'runtime', type: 'ping', payload: { to: 'echo', message: { type: 'ping', n: 4 } } }]);
  });
});

// A test helper: wraps one of a run's services (by name) so that a test can edit the messages it delivers, e.g.
// to inject a fault or a protocol error, or to script what a random model cannot write.

import type { Delivery, Service, World } from '../src/runtime/world.js';

/** For `runScenario`'s `wrapService`: `edit` sees every batch of deliveries of the named service, in place. */
export const editDeliveries =
  (name: string, edit: (deliveries: Delivery[], world: World) => void) =>
  (service: Service): Service =>
    service.name !== name
      ? service
      : {
          ...service,
          hasPending: () => service.hasPending(),
          flush: async (world) => {
            const deliveries = await service.flush(world);
            edit(deliveries, world);
            return deliveries;
          },
        };

/** The result list of a batched reply (validated, checked, generated), for editing. */
export const resultsOf = <T = { requestId: number }>(delivery: Delivery) => (delivery.message as unknown as { results: T[] }).results;

// What protect() (hosts/node/src/tools.js) calls to open its journal, in a Worker: the
// journal is the Durable Object's, passed as an object in `options.journal`.
/** @param {any} location */
export function openJournal(location) {
  if (typeof location === 'object' && location !== null && typeof location.append === 'function') return location;
  throw new TypeError('in a Worker, protect() takes the journal object itself (options.journal: the Durable Object\'s SqlJournal)');
}

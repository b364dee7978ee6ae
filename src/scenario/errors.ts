// A scenario that cannot be run as written: the message names the file, the field and what to write instead.
export class ScenarioError extends Error {}

// A plug-in that cannot be used as it is (a file that does not exist or cannot be imported, a default export that
// lacks a member, a rule of replay broken at run time): its message names the file and what to do.
export class PluginError extends Error {}

// The one way the dashboard turns a name into a file: only inside the folders it was told to serve. A URL never
// names a path (folders are looked up by id among those found by scanning, folders.ts); what is read inside a run
// folder is one of a fixed set of file names; and every file or folder is taken by its real path, which must lie
// under a served folder's real path, so a symbolic link that leads out of it is refused like `..` would be.

import { lstatSync, readdirSync, realpathSync } from 'node:fs';
import { join, sep } from 'node:path';

/** `path` resolved through every link, if it exists and lies in `root` (itself a real path); else null. */
export function realPathInside(root: string, path: string): string | null {
  let real: string;
  try {
    real = realpathSync(path);
  } catch {
    return null; // missing, or a dangling link
  }
  return real === root || real.startsWith(root.endsWith(sep) ? root : root + sep) ? real : null;
}

/** A file of a folder, by a fixed name the caller chose (never from a request), if it exists inside `root`. */
export const fileInside = (root: string, dir: string, name: string): string | null => realPathInside(root, join(dir, name));

/**
 * The first file or folder under `dir` (itself included) that is a link leading out of `root`, or null. For code
 * that reads a folder by its own paths (the report's loadRun, for a sweep's comparison): checked before it reads.
 */
export function linkOutOf(root: string, dir: string): string | null {
  if (!realPathInside(root, dir)) return dir;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isSymbolicLink() && !realPathInside(root, path)) return path;
    if (lstatSync(path).isDirectory()) {
      const found = linkOutOf(root, path);
      if (found) return found;
    }
  }
  return null;
}

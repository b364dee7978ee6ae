// Checks the links of README.md and docs/**/*.md without the network: every relative link names a file or folder
// that exists, and every anchor (#section, in the same page or another) names a heading there (GitHub's slugs) or
// an HTML id. External links (http:, https:, mailto:) are not followed. Links inside code are not links.
//
//   node scripts/check-links.mjs [FILE_OR_FOLDER ...]   default: README.md docs; exit 1 and one line per broken link

import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** GitHub's heading slug (github-slugger): lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading) {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // a link's text only
    .replace(/<[^>]+>/g, '') // inline HTML tags
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
}

/** The text of a page with code blocks and inline code blanked (their line breaks kept, so line numbers hold). A
 * fence's indentation is spaces or tabs only: `\s*` would take a blank line before it, and the block would run on to the
 * next fence that follows a blank line. */
function withoutCode(text) {
  return text
    .replace(/^([ \t]*)(```|~~~)[^\n]*\n[\s\S]*?^\1\2[^\n]*$/gm, (block) => block.replace(/[^\n]/g, ' '))
    .replace(/(`+)(?:(?!\1)[\s\S])+?\1/g, (code) => code.replace(/[^\n]/g, ' '));
}

/** An ATX heading line; its text is group 1. */
const HEADING = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/;

/** Every anchor a page offers: its headings' slugs (repeats numbered as GitHub does) and its HTML ids and names. */
export function anchorsOf(text) {
  const anchors = new Set();
  const counts = new Map();
  const lines = text.split('\n');
  // A heading is found where code is blanked (a fence's "# comment" is none), and slugged from its own text, inline
  // code included, as GitHub slugs it ("## The `arith` domain" is #the-arith-domain).
  withoutCode(text).split('\n').forEach((line, i) => {
    const heading = HEADING.test(line) && HEADING.exec(lines[i]);
    if (heading) {
      const base = slug(heading[1]);
      const n = counts.get(base) ?? 0;
      counts.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const [, id] of line.matchAll(/<[a-z][^>]*\s(?:id|name)="([^"]+)"/gi)) anchors.add(id);
  });
  return anchors;
}

/** Every link of a page: inline ([text](target), images too) and reference definitions ([label]: target), with line numbers. */
export function linksOf(text) {
  const links = [];
  withoutCode(text)
    .split('\n')
    .forEach((line, i) => {
      for (const [, target] of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ target, line: i + 1 });
      const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$/.exec(line);
      if (definition) links.push({ target: definition[1], line: i + 1 });
    });
  return links;
}

/** The broken links of the Markdown file `file`: one sentence each, naming the file, the line and the target. */
export function brokenLinks(file) {
  const text = readFileSync(file, 'utf8');
  const problems = [];
  for (const { target, line } of linksOf(text)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:, ...: not followed
    const [pathPart, anchor] = target.split('#', 2);
    const path = decodeURIComponent(pathPart);
    const where = `${file}:${line}: link "${target}"`;
    const linked = path === '' ? file : resolve(dirname(file), path);
    if (!existsSync(linked)) {
      problems.push(`${where}: ${relative(process.cwd(), linked) || linked} does not exist`);
      continue;
    }
    if (anchor === undefined || anchor === '') continue;
    if (statSync(linked).isDirectory() || extname(linked).toLowerCase() !== '.md') continue; // anchors are checked in Markdown pages
    if (!anchorsOf(readFileSync(linked, 'utf8')).has(decodeURIComponent(anchor))) problems.push(`${where}: ${path === '' ? 'this page' : path} has no heading or id "${anchor}"`);
  }
  return problems;
}

/** The Markdown files under the given files and folders (node_modules and dist/ left out). */
export function markdownFiles(paths) {
  return paths.flatMap((path) => {
    if (!existsSync(path)) return [];
    if (statSync(path).isFile()) return [path];
    return readdirSync(path)
      .filter((name) => name !== 'node_modules' && name !== 'dist' && !name.startsWith('.'))
      .sort()
      .flatMap((name) => {
        const child = join(path, name);
        return statSync(child).isDirectory() ? markdownFiles([child]) : extname(name) === '.md' ? [child] : [];
      });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const targets = process.argv.slice(2);
  const files = markdownFiles(targets.length > 0 ? targets : ['README.md', 'docs']);
  const problems = files.flatMap(brokenLinks);
  for (const problem of problems) console.error(problem);
  console.log(`${files.length} Markdown files, ${problems.length} broken link(s)`);
  process.exitCode = problems.length > 0 ? 1 : 0;
}

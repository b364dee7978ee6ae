// The documentation's links, checked without the network (scripts/check-links.mjs, also run by `npm test` through
// `npm run docs:check`): the checker on pages written here with known good and broken links, then on README.md and
// docs/ as they are.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript script (it runs without a build), without declarations
import { anchorsOf, brokenLinks, markdownFiles, slug } from '../scripts/check-links.mjs';

const dir = mkdtempSync(join(tmpdir(), 'populora-links-'));
mkdirSync(join(dir, 'docs'));
writeFileSync(join(dir, 'docs', 'other.md'), '# Other page\n\n## Writing a plug-in: the rules\n\n## Repeated\n\n## Repeated\n\n<a id="kept"></a>\n');
writeFileSync(join(dir, 'docs', 'image.png'), '');
writeFileSync(
  join(dir, 'page.md'),
  [
    '# Page', // 1
    '[good](docs/other.md#writing-a-plug-in-the-rules) [second repeat](docs/other.md#repeated-1) [html id](docs/other.md#kept)', // 2
    '![image](docs/image.png) [here](#page) [web](https://example.org/nowhere) [folder](docs/)', // 3
    '[missing file](docs/gone.md)', // 4
    '[missing anchor](docs/other.md#no-such-heading)', // 5
    '`[in code](nowhere.md)`', // 6
    '```', // 7
    '[in a fence](nowhere.md)', // 8
    '```', // 9
    '[ref]: docs/absent.md', // 10
  ].join('\n'),
);

describe('the link checker', () => {
  it('makes GitHub\'s slugs: lower case, punctuation dropped, repeats numbered', () => {
    expect(slug('Writing a plug-in: the rules')).toBe('writing-a-plug-in-the-rules');
    expect(slug('`populora init` and [links](x.md)')).toBe('populora-init-and-links');
    expect([...anchorsOf('# A\n## A\n```\n# not a heading\n```\n')]).toEqual(['a', 'a-1']);
    // A fence after a blank line ends at its own closing fence, not at the next fence that follows a blank line
    // (the checker once let the fence's indentation match the blank line, and lost every heading in between).
    expect([...anchorsOf('# A\n\n```sh\ncode\n```\n\n## B\n\n```\n# not a heading\n```\n')]).toEqual(['a', 'b']);
    expect([...anchorsOf('## The `arith` domain\n## `models/arith-tiny`\n')]).toEqual(['the-arith-domain', 'modelsarith-tiny']);
  });

  it('names each broken relative link and anchor by file and line, and nothing else', () => {
    const problems = brokenLinks(join(dir, 'page.md')) as string[];
    expect(problems.map((p) => p.replace(`${dir}/`, ''))).toEqual([
      expect.stringMatching(/^page\.md:4: link "docs\/gone\.md": .*docs\/gone\.md does not exist$/),
      'page.md:5: link "docs/other.md#no-such-heading": docs/other.md has no heading or id "no-such-heading"',
      expect.stringMatching(/^page\.md:10: link "docs\/absent\.md": .*docs\/absent\.md does not exist$/),
    ]);
  });

  it('finds no broken link in README.md and docs/', () => {
    const root = join(import.meta.dirname, '..');
    const files = markdownFiles([join(root, 'README.md'), join(root, 'docs')]) as string[];
    expect(files.length).toBeGreaterThanOrEqual(3);
    expect(files.flatMap((file) => brokenLinks(file) as string[])).toEqual([]);
  });
});

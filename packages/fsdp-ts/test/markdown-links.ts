import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import GithubSlugger from 'github-slugger';

// [Note: link check]
// A relative link in the repository's Markdown must reach something: the file (or directory) it
// names must exist, and a `#anchor` into a Markdown file (or into the same file) must be the slug
// GitHub gives one of its headings (github-slugger: lower case, punctuation dropped, spaces to
// '-', '-1', '-2' … for repeats) or an explicit `id`/`name` attribute. External links (a scheme
// such as https: or mailto:) are not fetched. Links inside code blocks and code spans are not
// links.

/** One link that does not resolve. */
export interface BrokenLink {
  /** The Markdown file, relative to the root. */
  file: string;
  line: number;
  target: string;
  reason: string;
}

/** The lines of a document outside fenced code blocks, with code spans blanked (same line numbers). */
function proseLines(markdown: string): string[] {
  let fence: string | null = null;
  return markdown.split('\n').map((line) => {
    const opening = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence !== null) {
      if (opening !== null && opening[1]!.startsWith(fence)) fence = null;
      return '';
    }
    if (opening !== null) {
      fence = opening[1]!;
      return '';
    }
    return line.replace(/(`+)(?:(?!\1).)+?\1/g, (span) => ' '.repeat(span.length));
  });
}

/** The anchors a Markdown document defines: its headings' GitHub slugs and explicit ids. */
export function markdownAnchors(markdown: string): Set<string> {
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  let fence: string | null = null;
  for (const line of markdown.split('\n')) {
    const opening = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence !== null) {
      if (opening !== null && opening[1]!.startsWith(fence)) fence = null;
      continue;
    }
    if (opening !== null) {
      fence = opening[1]!;
      continue;
    }
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading !== null) {
      // The heading's text as GitHub renders it: link text without its target, no HTML tags.
      const text = heading[1]!.replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
      anchors.add(slugger.slug(text));
    }
    for (const match of line.matchAll(/<[a-z]+\s[^>]*\b(?:id|name)="([^"]+)"/gi)) anchors.add(match[1]!);
  }
  return anchors;
}

/** Every link target of a document with its line: inline links, images, reference definitions, href/src. */
export function markdownLinks(markdown: string): { target: string; line: number }[] {
  const links: { target: string; line: number }[] = [];
  proseLines(markdown).forEach((text, index) => {
    const line = index + 1;
    for (const match of text.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ target: match[1]!.replace(/^<|>$/g, ''), line });
    }
    const definition = /^ {0,3}\[[^\]]+\]:\s*(\S+)/.exec(text);
    if (definition !== null) links.push({ target: definition[1]!.replace(/^<|>$/g, ''), line });
    for (const match of text.matchAll(/<(?:a|img)\s[^>]*\b(?:href|src)="([^"]+)"/gi)) {
      links.push({ target: match[1]!, line });
    }
  });
  return links;
}

/** The broken relative links of `files` (paths relative to `root`). */
export function brokenLinks(root: string, files: readonly string[]): BrokenLink[] {
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = (path: string) => {
    let found = anchorsOf.get(path);
    if (found === undefined) {
      found = markdownAnchors(readFileSync(path, 'utf8'));
      anchorsOf.set(path, found);
    }
    return found;
  };
  const broken: BrokenLink[] = [];
  for (const file of files) {
    const source = join(root, file);
    for (const { target, line } of markdownLinks(readFileSync(source, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue; // https:, mailto:, …
      const hash = target.indexOf('#');
      const pathPart = (hash < 0 ? target : target.slice(0, hash)).replace(/\?.*$/, '');
      const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
      let path: string;
      try {
        path =
          pathPart === ''
            ? source
            : join(pathPart.startsWith('/') ? root : dirname(source), decodeURIComponent(pathPart));
      } catch {
        broken.push({ file, line, target, reason: 'the link is not valid percent-encoding' });
        continue;
      }
      if (!existsSync(path)) {
        broken.push({ file, line, target, reason: `${relative(root, path)} does not exist` });
        continue;
      }
      if (anchor === null || anchor === '' || !path.endsWith('.md') || statSync(path).isDirectory()) continue;
      if (!anchors(path).has(anchor)) {
        broken.push({
          file,
          line,
          target,
          reason: `${relative(root, path)} has no heading whose anchor is #${anchor}`,
        });
      }
    }
  }
  return broken;
}

/** Markdown files under `directory` (relative to `root`), recursively, as paths relative to `root`. */
export function markdownFilesUnder(root: string, directory: string): string[] {
  if (!existsSync(join(root, directory))) return [];
  return readdirSync(join(root, directory), { withFileTypes: true })
    .flatMap((entry) => {
      const path = `${directory}/${entry.name}`;
      if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : markdownFilesUnder(root, path);
      return entry.name.endsWith('.md') ? [path] : [];
    })
    .sort();
}

/** One ```ts block of a README: its code, the prelude declared above it, and its first line. */
export interface TypeScriptBlock {
  code: string;
  prelude: string;
  /** 1-based line of the opening fence in the README. */
  line: number;
}

/**
 * The ```ts blocks of a Markdown document, each with the `<!-- prelude ... -->` comment that
 * directly precedes its fence (blank lines between them allowed), see [Note: README type test].
 */
export function extractTypeScriptBlocks(markdown: string): TypeScriptBlock[] {
  const lines = markdown.split('\n');
  const blocks: TypeScriptBlock[] = [];
  let prelude = '';
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!;
    if (line.trim().startsWith('<!-- prelude')) {
      const body: string[] = [];
      let end = index + 1;
      while (end < lines.length && lines[end]!.trim() !== '-->') body.push(lines[end++]!);
      prelude = body.join('\n');
      index = end;
    } else if (/^```(ts|typescript)\s*$/.test(line)) {
      const start = index;
      const body: string[] = [];
      index++;
      while (index < lines.length && !lines[index]!.startsWith('```')) body.push(lines[index++]!);
      blocks.push({ code: body.join('\n'), prelude, line: start + 1 });
      prelude = '';
    } else if (line.startsWith('```')) {
      // another language's block: skip it whole, and forget a prelude that was not for a ts block
      index++;
      while (index < lines.length && !lines[index]!.startsWith('```')) index++;
      prelude = '';
    } else if (line.trim() !== '') {
      prelude = '';
    }
  }
  return blocks;
}

/** One fenced block of a Markdown document: its language (the word after the fence) and its code. */
export interface FencedBlock {
  language: string;
  code: string;
}

/**
 * The fenced blocks of the section under the level-2 heading `## {heading}`, up to the next level-2
 * heading, in order. Throws when the document has no such section.
 */
export function sectionBlocks(markdown: string, heading: string): FencedBlock[] {
  const lines = markdown.split('\n');
  const start = lines.indexOf(`## ${heading}`);
  if (start === -1) throw new Error(`no '## ${heading}' section`);
  const blocks: FencedBlock[] = [];
  for (let index = start + 1; index < lines.length && !lines[index]!.startsWith('## '); index++) {
    const fence = /^```(\S*)\s*$/.exec(lines[index]!);
    if (fence === null) continue;
    const body: string[] = [];
    index++;
    while (index < lines.length && !lines[index]!.startsWith('```')) body.push(lines[index++]!);
    blocks.push({ language: fence[1]!, code: body.join('\n') });
  }
  return blocks;
}

/** The commands of a shell block: one per line, without `#` comments and blank lines. */
export function shellCommands(code: string): string[] {
  return code
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

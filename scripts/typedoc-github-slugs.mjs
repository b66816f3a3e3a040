// TypeDoc plugin: heading anchors in the API reference site are GitHub's, so a link written
// for GitHub (`README.md#elastic-jobs-fsdp-run---nnodes-minmax`, a heading with `code` in it)
// lands on its heading in the site too, and TypeDoc's anchor check agrees with
// packages/fsdp-ts/test/docs-links.test.ts. TypeDoc's own slugs collapse `--` and drop code
// spans from the heading's text.
import { slug as githubSlug } from 'github-slugger';
import { Application, Slugger } from 'typedoc';

/** @param {import('typedoc').Application} app */
export function load(app) {
  // The text of a heading as GitHub slugs it: code spans included. (TypeDoc reads the text of a
  // heading's children that have children or are text; a code span gets its text as a child.)
  // Set once the options are read: bootstrap resets them after loading plugins.
  app.on(Application.EVENT_BOOTSTRAP_END, () => setLoader(app));
  // GitHub's slug of the text; TypeDoc's Slugger then lowercases and numbers repeats (-1, -2),
  // as GitHub does.
  Slugger.prototype.serialize = (value) => githubSlug(value, true) || '_';
}

/** @param {import('typedoc').Application} app */
function setLoader(app) {
  app.options.setValue('markdownItLoader', (parser) => {
    parser.core.ruler.push('fsdp-ts-heading-code-text', (state) => {
      state.tokens.forEach((token, index) => {
        if (token.type !== 'heading_open') return;
        for (const child of state.tokens[index + 1]?.children ?? []) {
          if (child.type !== 'code_inline') continue;
          const text = new state.Token('text', '', 0);
          text.content = child.content;
          child.children = [text];
        }
      });
    });
  });
}

/**
 * Highlights the PTX and SASS panes of `%%ptx` views shown in a notebook: each line's text
 * is split into spans by token kind (see asm.ts). Done here, in the page, because the view's
 * HTML belongs to perflab.render.ptx_view; a static export shows the panes unhighlighted.
 */
import { NotebookPanel } from '@jupyterlab/notebook';

import { paneDialect, tokenizeAsm } from './asm';

const DONE = 'perflabAsm';

function highlightLine(line: HTMLElement, dialect: 'ptx' | 'sass'): void {
  for (const node of [...line.childNodes]) {
    if (node.nodeType !== Node.TEXT_NODE || !node.textContent) {
      continue; // the line number is an element of its own
    }
    const pieces = tokenizeAsm(node.textContent, dialect);
    const parts = pieces.map(({ text, kind }) => {
      if (kind === null) {
        return document.createTextNode(text);
      }
      const span = document.createElement('span');
      span.className = `jp-perflab-asm-${kind}`;
      span.textContent = text;
      return span;
    });
    node.replaceWith(...parts);
  }
}

/** Highlight every PTX or SASS pane under ``root`` not yet done. */
export function highlightPanes(root: HTMLElement): void {
  for (const pane of root.querySelectorAll<HTMLElement>('.pv-pane')) {
    if (pane.dataset[DONE]) {
      continue;
    }
    pane.dataset[DONE] = '1';
    const dialect = paneDialect(pane.querySelector('h4')?.textContent ?? '');
    if (dialect) {
      pane.querySelectorAll<HTMLElement>('.pv-code > div').forEach(line => highlightLine(line, dialect));
    }
  }
}

/** Highlight views as they appear in ``panel`` (once per animation frame at most). */
export function watchOutputs(panel: NotebookPanel): void {
  let scheduled = false;
  const observer = new MutationObserver(() => {
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(() => {
        scheduled = false;
        highlightPanes(panel.content.node);
      });
    }
  });
  observer.observe(panel.content.node, { childList: true, subtree: true });
  panel.disposed.connect(() => observer.disconnect());
}

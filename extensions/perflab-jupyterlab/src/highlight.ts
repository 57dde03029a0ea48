/**
 * `%%ptx` cells of CUDA C++ get the CUDA mode; every other code cell keeps the notebook's
 * (kernel's) language. The notebook resets cell mime types when the kernel's language
 * arrives, so each cell's mime type is checked again whenever it or the source changes.
 */
import { ICellModel } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';

import { cellMime } from './pure';

const watched = new WeakSet<ICellModel>();

function apply(panel: NotebookPanel, model: ICellModel): void {
  if (model.type !== 'code' || panel.isDisposed) {
    return;
  }
  const wanted = cellMime(model.sharedModel.getSource(), panel.content.codeMimetype);
  if (model.mimeType !== wanted) {
    model.mimeType = wanted;
  }
}

function watch(panel: NotebookPanel, model: ICellModel): void {
  if (watched.has(model)) {
    return;
  }
  watched.add(model);
  model.sharedModel.changed.connect((_, change) => {
    if (change.sourceChange) {
      apply(panel, model);
    }
  });
  model.mimeTypeChanged.connect(() => apply(panel, model));
  apply(panel, model);
}

/** Keep the cells of ``panel`` highlighted by their first line. */
export function watchCells(panel: NotebookPanel): void {
  const each = () => {
    const cells = panel.content.model?.cells;
    if (!cells) {
      return;
    }
    for (let i = 0; i < cells.length; i++) {
      watch(panel, cells.get(i));
    }
  };
  panel.content.modelChanged.connect(() => {
    each();
    panel.content.model?.cells.changed.connect(each);
  });
  panel.content.model?.cells.changed.connect(each);
  each();
}

/**
 * perflab in JupyterLab: a profile-cell command (toolbar button, palette, shortcut), the
 * perf history side panel, CUDA highlighting of `%%ptx` cells and the device status item.
 * Python does the work (perflab.labext in the kernel); this file wires the pieces.
 */
import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, ToolbarButton } from '@jupyterlab/apputils';
import { CodeCell } from '@jupyterlab/cells';
import { IEditorLanguageRegistry } from '@jupyterlab/codemirror';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { OutputArea } from '@jupyterlab/outputarea';
import { IStatusBar } from '@jupyterlab/statusbar';
import { LabIcon } from '@jupyterlab/ui-components';
import { LanguageSupport, StreamLanguage } from '@codemirror/language';

import { watchOutputs } from './asmview';
import { cuda } from './cuda';
import { watchCells } from './highlight';
import { KernelLink, linkFor } from './link';
import { HistoryPanel } from './panel';
import { CUDA_MIME, profileCode, untimedReason } from './pure';
import { STATUS_ID, StatusItem } from './status';

export const PROFILE_COMMAND = 'perflab:profile-cell';
const PROFILE_KEYS = ['Accel Alt P'];

const TIMER_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
  '<path class="jp-icon3" fill="#616161" d="M15 1H9v2h6V1zm-4 13h2V8h-2v6zm8.03-6.61 ' +
  '1.42-1.42a11 11 0 0 0-1.41-1.41l-1.42 1.42A9 9 0 1 0 21 13a8.96 8.96 0 0 0-1.97-5.61z' +
  'M12 20a7 7 0 1 1 0-14 7 7 0 0 1 0 14z"/></svg>';
const timerIcon = new LabIcon({ name: 'perflab:timer', svgstr: TIMER_SVG });

/** Say in ``cell``'s output why it was not profiled (nothing goes into the history). */
function notProfiled(cell: CodeCell, why: string): void {
  cell.outputHidden = false;
  cell.model.outputs.clear();
  cell.model.outputs.add({
    output_type: 'stream',
    name: 'stderr',
    text: `perflab: not profiled: ${why}\n`
  });
}

/**
 * Run ``cell`` as `%%gpuprofile` would in its kernel, output in the cell, source untouched,
 * through perflab.labext.profile_cell: the kernel's magics stay as the notebook set them.
 */
async function profileCell(panel: NotebookPanel, cell: CodeCell, link: KernelLink): Promise<void> {
  const source = cell.model.sharedModel.getSource();
  const untimed = untimedReason(source);
  if (untimed !== null) {
    notProfiled(cell, untimed);
    return;
  }
  if (!(await link.ready())) {
    notProfiled(cell, link.error ?? 'perflab is not connected to the kernel');
    return;
  }
  const code = profileCode(source);
  cell.outputHidden = false;
  cell.setPrompt('*');
  cell.model.trusted = true;
  try {
    const reply = await OutputArea.execute(code, cell.outputArea, panel.sessionContext);
    cell.model.executionCount = reply ? reply.content.execution_count : null;
    if (!reply) {
      cell.setPrompt('');
    }
  } catch (reason) {
    cell.setPrompt('');
    if (!(reason instanceof Error && reason.message.startsWith('Canceled'))) {
      throw reason;
    }
  }
}

const main: JupyterFrontEndPlugin<void> = {
  id: 'perflab-jupyterlab:plugin',
  description: 'perflab: profile button, perf history panel and device status.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, IStatusBar, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    statusBar: IStatusBar | null,
    restorer: ILayoutRestorer | null
  ) => {
    app.commands.addCommand(PROFILE_COMMAND, {
      label: 'Profile Cell with perflab',
      caption: 'Run the active cell timed by perflab (%%gpuprofile with default options)',
      icon: timerIcon,
      isEnabled: () => tracker.activeCell?.model.type === 'code',
      execute: async () => {
        const panel = tracker.currentWidget;
        const cell = tracker.activeCell;
        if (panel && cell instanceof CodeCell) {
          await profileCell(panel, cell, linkFor(panel));
        }
      }
    });
    app.commands.addKeyBinding({
      command: PROFILE_COMMAND,
      keys: PROFILE_KEYS,
      selector: '.jp-Notebook'
    });
    palette?.addItem({ command: PROFILE_COMMAND, category: 'perflab' });

    app.docRegistry.addWidgetExtension('Notebook', {
      createNew: (panel: NotebookPanel) => {
        const button = new ToolbarButton({
          icon: timerIcon,
          label: 'Profile',
          tooltip: 'Profile the cell with perflab (Ctrl+Alt+P)',
          onClick: () => void app.commands.execute(PROFILE_COMMAND)
        });
        button.addClass('jp-perflab-profile-button');
        panel.toolbar.insertItem(10, 'perflab-profile', button);
        linkFor(panel);
        return button;
      }
    });

    const history = new HistoryPanel();
    app.shell.add(history, 'right', { rank: 900 });
    restorer?.add(history, history.id);
    const status = new StatusItem();
    statusBar?.registerStatusItem(STATUS_ID, {
      item: status,
      align: 'left',
      rank: 10,
      isActive: () => true
    });
    const follow = () => {
      const panel = tracker.currentWidget;
      const link = panel ? linkFor(panel) : null;
      history.setLink(link);
      status.setLink(link);
    };
    tracker.currentChanged.connect(follow);
    follow();
  }
};

const highlight: JupyterFrontEndPlugin<void> = {
  id: 'perflab-jupyterlab:ptx-highlight',
  description: 'Highlights %%ptx cells of CUDA C++ as CUDA, and the PTX and SASS panes.',
  autoStart: true,
  requires: [INotebookTracker, IEditorLanguageRegistry],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, languages: IEditorLanguageRegistry) => {
    languages.addLanguage({
      name: 'CUDA',
      displayName: 'CUDA C++',
      mime: CUDA_MIME,
      extensions: ['cu', 'cuh'],
      load: async () => new LanguageSupport(StreamLanguage.define(cuda))
    });
    const watch = (panel: NotebookPanel) => {
      watchCells(panel);
      watchOutputs(panel);
    };
    tracker.widgetAdded.connect((_, panel) => watch(panel));
    tracker.forEach(watch);
  }
};

export default [main, highlight];

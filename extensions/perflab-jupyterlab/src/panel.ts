/**
 * The perf history side panel: every timing result of the current notebook, live; select
 * two rows (or one, with a baseline marked) to compare them in Python, the answer shown
 * above the rows; mark a baseline; sort by time or name; export CSV or JSON. Rows wrap
 * rather than cut, so the side panel's narrow default width shows all of them.
 * Everything is written with textContent: names are never HTML.
 */
import { LabIcon } from '@jupyterlab/ui-components';

import { KernelLink, LinkedWidget } from './link';
import {
  checkComparison,
  comparePair,
  formatTime,
  IRow,
  medianParts,
  ranOn,
  rowLabel,
  rowText,
  SORT_KEYS,
  SORT_LABELS,
  SortKey,
  sortKey,
  sortRows
} from './pure';

export const PANEL_ID = 'perflab-history';

const HISTORY_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">' +
  '<path class="jp-icon3" fill="#616161" d="M13 3a9 9 0 0 0-9 9H1l3.9 3.9L9 12H6a7 7 0 1 1 ' +
  '2.05 4.95l-1.42 1.42A9 9 0 1 0 13 3zm-1 5v5l4.28 2.54.72-1.21-3.5-2.08V8H12z"/></svg>';

// the sort chosen is kept for the browser tab's session, across reloads
const SORT_STORAGE = 'perflab-jupyterlab:history-sort';

function storedSort(): SortKey {
  try {
    return sortKey(window.sessionStorage.getItem(SORT_STORAGE));
  } catch {
    return 'run'; // storage refused (a sandboxed page): the panel still sorts
  }
}

function storeSort(key: SortKey): void {
  try {
    window.sessionStorage.setItem(SORT_STORAGE, key);
  } catch {
    // as above: the choice then lasts as long as the panel
  }
}

export const historyIcon = new LabIcon({ name: 'perflab:history', svgstr: HISTORY_SVG });

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className = '',
  text = ''
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text) {
    node.textContent = text;
  }
  return node;
}

export class HistoryPanel extends LinkedWidget {
  constructor() {
    super();
    this.id = PANEL_ID;
    this.addClass('jp-perflab-history');
    this.title.icon = historyIcon;
    this.title.caption = 'perflab: perf history';
    const head = el('div', 'jp-perflab-history-head');
    head.append(el('span', 'jp-perflab-history-title', 'Perf history'));
    for (const format of ['csv', 'json']) {
      const button = el('button', `jp-mod-styled jp-perflab-export-${format}`, format.toUpperCase());
      button.title = `Export the history as ${format.toUpperCase()}`;
      button.onclick = () => void this._export(format);
      head.append(button);
    }
    this._table.append(this._head(), this._body);
    this.node.append(
      head,
      this._notebook,
      this._sortControl(),
      this._message,
      this._compare,
      this._hint,
      this._table
    );
    this._hint.textContent =
      'Select two rows to compare them, or one row and a baseline (☆ marks it).';
    this.render();
  }

  protected linkChanged(): void {
    this._selected.clear();
  }

  render(): void {
    const link = this.link;
    this._notebook.textContent = link ? link.notebookName : 'no notebook';
    this._notebook.title = this._notebook.textContent;
    this._message.textContent = link?.error ?? link?.note ?? '';
    this._message.hidden = !this._message.textContent;
    const rows = sortRows(link?.rows ?? [], this._sort);
    this._body.replaceChildren(...rows.map(row => this._row(row, link!)));
    if (rows.length === 0) {
      const empty = el('td', 'jp-perflab-empty', 'No timing results yet: profile a cell.');
      empty.colSpan = 3;
      const tr = el('tr');
      tr.append(empty);
      this._body.append(tr);
    }
    void this._updateComparison();
  }

  private _sortControl(): HTMLElement {
    const label = el('label', 'jp-perflab-sort-label', 'Sort by ');
    const select = el('select', 'jp-perflab-sort');
    for (const key of SORT_KEYS) {
      const option = el('option', '', SORT_LABELS[key]);
      option.value = key;
      select.append(option);
    }
    select.value = this._sort;
    select.title = 'The order of the rows';
    select.onchange = () => {
      this._sort = sortKey(select.value);
      storeSort(this._sort);
      this.render();
    };
    label.append(select);
    return label;
  }

  private _head(): HTMLElement {
    const thead = el('thead');
    const tr = el('tr');
    for (const name of ['', 'median (95% CI)', '']) {
      tr.append(el('th', '', name));
    }
    thead.append(tr);
    return thead;
  }

  private _row(row: IRow, link: KernelLink): HTMLElement {
    const tr = el('tr', 'jp-perflab-row');
    tr.dataset.id = row.id;
    const isBase = row.id === link.baseline;
    tr.title = rowText(row, isBase);
    tr.classList.toggle('jp-perflab-baseline-row', isBase);
    tr.classList.toggle('jp-perflab-selected', this._selected.has(row.id));
    const pick = el('input', 'jp-perflab-pick');
    pick.type = 'checkbox';
    pick.checked = this._selected.has(row.id);
    pick.title = 'select to compare';
    pick.onchange = () => {
      if (pick.checked) {
        this._selected.add(row.id);
      } else {
        this._selected.delete(row.id);
      }
      this.render();
    };
    const about = el('td', 'jp-perflab-about');
    const name = el('div', 'jp-perflab-name');
    name.append(
      el('span', 'jp-perflab-id', rowLabel(row.id)),
      el('span', 'jp-perflab-name-text', row.name)
    );
    if (row.replayed) {
      name.append(el('span', 'jp-perflab-tag', 'replayed'));
    }
    // median and interval each stay whole, the interval on a line of its own when narrow
    const [value, interval] = medianParts(row);
    const median = el('div', 'jp-perflab-median');
    median.append(
      el('span', 'jp-perflab-median-value', value),
      ' ',
      el('span', 'jp-perflab-interval', interval)
    );
    median.dataset.medianNs = String(row.median_ns);
    const device = el('div', 'jp-perflab-device', ranOn(row));
    device.append(el('span', 'jp-perflab-time', formatTime(row.created)));
    about.append(name, median, device);
    for (const warning of row.warnings) {
      about.append(el('div', 'jp-perflab-warning', `⚠ ${warning}`));
    }
    const star = el('button', 'jp-perflab-baseline', isBase ? '★' : '☆');
    star.title = isBase ? 'baseline (click to unmark)' : 'mark as baseline';
    star.onclick = () => void this._setBaseline(isBase ? null : row.id);
    const cells = [el('td'), about, el('td')];
    cells[0].append(pick);
    cells[2].append(star);
    tr.append(...cells);
    return tr;
  }

  private async _updateComparison(): Promise<void> {
    const link = this.link;
    const pair = link ? comparePair([...this._selected], link.rows, link.baseline) : null;
    const key = pair ? pair.join('|') : '';
    if (key === this._compareKey) {
      return;
    }
    this._compareKey = key;
    this._compare.replaceChildren();
    this._compare.classList.remove('jp-perflab-not-comparable');
    this._hint.hidden = pair !== null;
    if (!pair || !link) {
      return;
    }
    const which = el('span', 'jp-perflab-compare-pair', pair.map(rowLabel).join(' vs ') + ': ');
    const text = el('span', 'jp-perflab-compare-text', 'comparing…');
    this._compare.append(which, text);
    this._showComparison();
    try {
      const reply = await link.request({ type: 'compare', a: pair[0], b: pair[1] });
      const answer = checkComparison(reply);
      text.textContent = answer ? answer.text : String(reply.text);
      if (this._compareKey === key) {
        // results of other devices, or one of an interpreter: said so and marked, no ratio
        this._compare.classList.toggle('jp-perflab-not-comparable', answer?.comparable === false);
      }
    } catch (reason) {
      text.textContent = `comparison failed: ${(reason as Error).message}`;
    }
    if (this._compareKey === key) {
      this._showComparison(); // its answer can take more lines than "comparing…"
    }
  }

  /** Scroll the comparison (above the rows) into view: the rows picked may be far below. */
  private _showComparison(): void {
    this._compare.scrollIntoView({ block: 'nearest' });
  }

  private async _setBaseline(id: string | null): Promise<void> {
    try {
      await this.link?.request({ type: 'baseline', id });
    } catch (reason) {
      this._message.textContent = `baseline: ${(reason as Error).message}`;
      this._message.hidden = false;
    }
  }

  private async _export(format: string): Promise<void> {
    if (!this.link) {
      return;
    }
    try {
      const reply = await this.link.request({ type: 'export', format });
      const type = format === 'csv' ? 'text/csv' : 'application/json';
      const url = URL.createObjectURL(new Blob([String(reply.text)], { type }));
      const a = el('a');
      a.href = url;
      a.download = String(reply.filename);
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (reason) {
      this._message.textContent = `export: ${(reason as Error).message}`;
      this._message.hidden = false;
    }
  }

  private _selected = new Set<string>();
  private _sort = storedSort();
  private _compareKey = '';
  private _notebook = el('div', 'jp-perflab-history-notebook');
  private _message = el('div', 'jp-perflab-message');
  private _table = el('table', 'jp-perflab-table');
  private _body = el('tbody');
  private _compare = el('div', 'jp-perflab-compare');
  private _hint = el('div', 'jp-perflab-hint');
}

/**
 * The status bar item: the current notebook kernel's timing backend and device, from
 * `perflab info --json` run in that kernel.
 */
import { Widget } from '@lumino/widgets';

import { KernelLink } from './link';
import { statusText } from './pure';

export const STATUS_ID = 'perflab-status';

export class StatusItem extends Widget {
  constructor() {
    super();
    this.addClass('jp-perflab-status');
    this.node.title = 'perflab: the kernel’s timing backend and device (perflab info)';
    this.render();
  }

  setLink(link: KernelLink | null): void {
    if (link === this._link) {
      return;
    }
    this._link?.changed.disconnect(this.render, this);
    this._link = link;
    link?.changed.connect(this.render, this);
    this.render();
  }

  render(): void {
    const link = this._link;
    let text = 'perflab';
    if (link?.error) {
      text = 'perflab: not in this kernel';
      this.node.title = link.error;
    } else if (link?.info) {
      text = statusText(link.info);
    } else if (link) {
      text = 'perflab: …';
    }
    this.node.textContent = text;
  }

  private _link: KernelLink | null = null;
}

/**
 * The status bar item: the current notebook kernel's timing backend and device, from
 * `perflab info --json` run in that kernel.
 */
import { LinkedWidget } from './link';
import { statusText } from './pure';

export const STATUS_ID = 'perflab-status';

export class StatusItem extends LinkedWidget {
  constructor() {
    super();
    this.addClass('jp-perflab-status');
    this.render();
  }

  render(): void {
    const link = this.link;
    let text = 'perflab';
    this.node.title = 'perflab: the kernel’s timing backend and device (perflab info)';
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
}

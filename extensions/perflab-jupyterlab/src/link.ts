/**
 * The link between one notebook and perflab in its kernel: runs perflab.labext.connect in
 * the kernel (again after every restart; it loads no magics), opens the comm, keeps the
 * history rows the kernel sends and answers requests (compare, baseline, export, info).
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { checkRow, checkRows, connectCode, IInfo, IRow } from './pure';

export const COMM_TARGET = 'perflab';

type Reply = Record<string, unknown>;
interface IPending {
  resolve: (reply: Reply) => void;
  reject: (error: Error) => void;
}

const DOWN = new Set(['restarting', 'autorestarting', 'dead', 'starting', 'unknown']);

export class KernelLink {
  constructor(readonly panel: NotebookPanel) {
    const session = panel.sessionContext;
    session.statusChanged.connect(this._onStatus, this);
    session.kernelChanged.connect(this._drop, this);
    panel.context.pathChanged.connect(this._onRename, this);
    void session.ready.then(() => this.ready());
  }

  /** Rows, baseline, note, error, info or connection changed. */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get sessionContext(): ISessionContext {
    return this.panel.sessionContext;
  }

  /** The notebook's file name (its history is kept under this name beside it). */
  get notebookName(): string {
    return this.panel.context.path.split('/').pop() ?? '';
  }

  get connected(): boolean {
    return this._comm !== null;
  }

  rows: IRow[] = [];
  baseline: string | null = null;
  /** Something the kernel wants said (e.g. an unreadable history file moved aside). */
  note: string | null = null;
  /** Why perflab cannot be reached in this kernel (null when it can). */
  error: string | null = null;
  info: IInfo | null = null;

  /** Connect if not connected; resolves to whether perflab answers in the kernel. */
  ready(): Promise<boolean> {
    if (this._comm) {
      return Promise.resolve(true);
    }
    if (!this._connecting) {
      this._connecting = this._connect().finally(() => {
        this._connecting = null;
      });
    }
    return this._connecting;
  }

  /** Send a request to the kernel and wait for its answer (rejects with its error). */
  async request(data: Reply): Promise<Reply> {
    if (!(await this.ready()) || !this._comm) {
      throw new Error(this.error ?? 'perflab is not connected to the kernel');
    }
    const request = this._next++;
    const answer = new Promise<Reply>((resolve, reject) => {
      this._pending.set(request, { resolve, reject });
    });
    this._comm.send({ ...data, request });
    return answer;
  }

  dispose(): void {
    Signal.clearData(this);
    this._fail('the notebook was closed');
    this._comm = null;
  }

  private async _connect(): Promise<boolean> {
    const kernel = this.sessionContext.session?.kernel;
    if (!kernel || this.sessionContext.isDisposed) {
      return false;
    }
    this._tried = true;
    try {
      const info = await kernel.info;
      if (info.language_info.name !== 'python') {
        return this._setError('perflab needs a Python kernel');
      }
      const failure = await this._runConnect(kernel);
      if (failure) {
        return this._setError(`perflab is not usable in this kernel: ${failure}`);
      }
      this._comm = this._openComm(kernel);
      this.error = null;
      this._changed.emit();
      void this._askInfo();
      return true;
    } catch (reason) {
      return this._setError(`perflab: ${reason}`);
    }
  }

  private async _runConnect(
    kernel: Kernel.IKernelConnection,
    renamedFrom?: string
  ): Promise<string | null> {
    const name = this.notebookName;
    const future = kernel.requestExecute({
      code: connectCode(name, renamedFrom),
      silent: true,
      store_history: false,
      allow_stdin: false,
      stop_on_error: false
    });
    let failure: string | null = null;
    future.onIOPub = msg => {
      if (KernelMessage.isErrorMsg(msg)) {
        failure = `${msg.content.ename}: ${msg.content.evalue}`;
      }
    };
    const reply = await future.done;
    if (reply.content.status !== 'ok') {
      return failure ?? reply.content.status;
    }
    this._connectedName = name;
    return null;
  }

  /** The notebook was renamed: its history follows it in the kernel. */
  private async _onRename(): Promise<void> {
    const kernel = this.sessionContext.session?.kernel;
    const before = this._connectedName;
    if (!kernel || !this._comm || before === null || before === this.notebookName) {
      return;
    }
    const failure = await this._runConnect(kernel, before);
    this.note = failure ? `perflab: the history did not follow the rename: ${failure}` : null;
    this._changed.emit();
  }

  private _openComm(kernel: Kernel.IKernelConnection): Kernel.IComm {
    const comm = kernel.createComm(COMM_TARGET);
    comm.onMsg = msg => this._onMessage(msg.content.data as Reply);
    comm.onClose = () => {
      if (this._comm === comm) {
        this._comm = null;
        this._changed.emit();
      }
    };
    comm.open({});
    return comm;
  }

  private async _askInfo(): Promise<void> {
    try {
      this.info = (await this.request({ type: 'info' })).doc as IInfo;
    } catch (reason) {
      this.info = null;
      this.note = `perflab info: ${(reason as Error).message}`;
    }
    this._changed.emit();
  }

  private _onMessage(data: Reply): void {
    const pending =
      typeof data.request === 'number' ? this._pending.get(data.request) : undefined;
    if (pending) {
      this._pending.delete(data.request as number);
      if (data.type === 'error') {
        pending.reject(new Error(String(data.message)));
      } else {
        pending.resolve(data);
      }
      return;
    }
    if (data.type === 'history') {
      this.rows = checkRows(data.rows);
      this.note = typeof data.note === 'string' ? data.note : null;
    } else if (data.type === 'added') {
      const row = checkRow(data.row);
      if (row) {
        this.rows = [...this.rows, row];
      }
    } else if (data.type === 'error') {
      this.note = String(data.message);
    }
    if ('baseline' in data) {
      this.baseline = typeof data.baseline === 'string' ? data.baseline : null;
    }
    this._changed.emit();
  }

  private _onStatus(_: ISessionContext, status: Kernel.Status): void {
    if (DOWN.has(status)) {
      this._drop();
    } else if (status === 'idle' && !this._comm && !this._connecting) {
      // first contact, or back after a restart (a failed attempt is not retried on every idle)
      if (this._wasDown || !this._tried) {
        this._wasDown = false;
        void this.ready();
      }
    }
  }

  /** The kernel went away (restart, change): its comm and answers are gone. */
  private _drop(): void {
    this._wasDown = true;
    this._comm = null;
    this.info = null;
    this._fail('the kernel restarted');
    this._changed.emit();
  }

  private _fail(why: string): void {
    for (const pending of this._pending.values()) {
      pending.reject(new Error(why));
    }
    this._pending.clear();
  }

  private _setError(message: string): boolean {
    this.error = message;
    this._changed.emit();
    return false;
  }

  private _changed = new Signal<this, void>(this);
  private _comm: Kernel.IComm | null = null;
  private _connecting: Promise<boolean> | null = null;
  private _pending = new Map<number, IPending>();
  private _next = 1;
  private _wasDown = false;
  private _tried = false;
  private _connectedName: string | null = null;
}

const links = new WeakMap<NotebookPanel, KernelLink>();

/** The one link of a notebook panel (made on first use, disposed with the panel). */
export function linkFor(panel: NotebookPanel): KernelLink {
  let link = links.get(panel);
  if (!link) {
    const made = new KernelLink(panel);
    links.set(panel, made);
    panel.disposed.connect(() => made.dispose());
    link = made;
  }
  return link;
}

/** A widget that shows what one notebook's link knows, re-rendered when it changes. */
export abstract class LinkedWidget extends Widget {
  /** Follow ``link`` (null: no notebook). */
  setLink(link: KernelLink | null): void {
    if (link === this.link) {
      return;
    }
    this.link?.changed.disconnect(this.render, this);
    this.link = link;
    link?.changed.connect(this.render, this);
    this.linkChanged();
    this.render();
  }

  abstract render(): void;

  /** Called when another notebook's link is followed, before rendering. */
  protected linkChanged(): void {
    // nothing by default
  }

  protected link: KernelLink | null = null;
}

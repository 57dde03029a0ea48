"""The kernel side of perflab's JupyterLab extension (``extensions/perflab-jupyterlab``).

The extension runs :func:`connect` in the notebook's kernel, then opens a comm on
:data:`COMM_TARGET`. This module keeps the notebook's history of timing results (every
result from ``%%gpuprofile``, the profile button and ``perflab.bench``), saved beside the
notebook in ``.perflab/NOTEBOOK.history.json`` as perflab's versioned JSON, and answers the
panel's requests: comparisons (``TimingResult.compare``), the baseline, CSV and JSON exports,
and ``perflab info --json`` for the status bar. The TypeScript side only formats.

Nothing here loads perflab's magics into the user's shell: a notebook that uses
``%%gpuprofile`` says ``%load_ext perflab``, so that it runs the same in nbconvert or papermill
as in JupyterLab. The profile button calls :func:`profile_cell`, which runs a cell through
``%%gpuprofile``'s own code without registering it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from perflab.errors import InputError, PerflabError, SchemaError
from perflab.model import listeners
from perflab.model.fields import MAX_TEXT
from perflab.model.serialize import dump_json, load_json, write_destination
from perflab.model.timing import TimingResult

if TYPE_CHECKING:
    from comm.base_comm import BaseComm
    from IPython.core.interactiveshell import InteractiveShell

    from perflab.magics.gpuprofile import GpuProfileMagics
    from perflab.model.saved import HistoryEntryDoc

COMM_TARGET = "perflab"
KIND = "TimingHistory"
HISTORY_DIR = ".perflab"
# Each result keeps every sample (compare needs them; up to ~10k each), and the file is
# rewritten after each result: the oldest go beyond this many.
MAX_RESULTS = 100
_log = logging.getLogger(__name__)
_ID = re.compile(r"r[1-9][0-9]{0,8}")
CSV_COLUMNS = (
    "id",
    "name",
    "median_ns",
    "ci95_low_ns",
    "ci95_high_ns",
    "n",
    "backend",
    "device",
    "created",
    "baseline",
    "warnings",
)


def history_path(notebook: str, directory: Path) -> Path:
    """Where the history of ``notebook`` (a file name, no directories) is kept."""
    if not notebook or Path(notebook).name != notebook or notebook in (".", ".."):
        raise InputError(f"expected a notebook file name, not {notebook!r}")
    return directory / HISTORY_DIR / f"{notebook}.history.json"


class HistoryRow(TypedDict):
    """What the panel shows of one result."""

    id: str
    name: str
    median_ns: float
    ci95_ns: list[float]
    n: int
    backend: str
    device: str
    interpreter: str | None  # "triton": in Triton's interpreter; None: not recorded
    dtype: str | None
    created: str
    warnings: list[str]
    replayed: bool


@dataclass
class HistoryEntry:
    id: str
    result: TimingResult

    def row(self) -> HistoryRow:
        """What the panel shows of this result."""
        r = self.result
        lo, hi = r.ci95_ns
        return {
            "id": self.id,
            "name": r.name,
            "median_ns": r.median_ns,
            "ci95_ns": [lo, hi],
            "n": r.n,
            "backend": r.backend,
            "device": r.device,
            "interpreter": r.interpreter,
            "dtype": r.dtype,
            "created": r.created,
            "warnings": list(r.warnings),
            "replayed": r.replayed_from is not None,
        }


@dataclass
class History:
    """The timing results of one notebook, oldest first, and the one marked as baseline."""

    path: Path
    entries: list[HistoryEntry] = field(default_factory=list)
    baseline: str | None = None
    next_id: int = 1

    @classmethod
    def open(cls, path: Path) -> tuple[History, str | None]:
        """The history saved at ``path`` (empty when there is none). An unreadable file is
        moved aside to ``PATH.unreadable`` and a note says why; the history starts afresh. So
        is a symbolic link out of its folder (one committed in a repository, say): saving the
        history must not overwrite the file it points to."""
        if not (path.exists() or path.is_symlink()):
            return cls(path), None
        try:
            write_destination(path)
            return cls.load(path), None
        except PerflabError as exc:
            aside = path.with_name(path.name + ".unreadable")
            try:
                path.replace(aside)
            except OSError as move:
                return cls(path), f"{exc}; could not move it aside ({move.strerror})"
            return cls(path), f"{exc}; moved to {aside.name}, the history starts afresh"

    @classmethod
    def load(cls, path: Path) -> History:
        doc = load_json(KIND, path)
        source = str(path)
        entries = doc.get("entries")
        if not isinstance(entries, list):
            raise SchemaError("expected a list of entries", source=source, position="entries")
        history = cls(path, [_entry(item, source, i) for i, item in enumerate(entries)])
        ids = [e.id for e in history.entries]
        if len(set(ids)) != len(ids):
            raise SchemaError("two entries share an id", source=source, position="entries")
        baseline = doc.get("baseline")
        if baseline is not None and baseline not in ids:
            raise SchemaError(f"no entry {baseline!r}", source=source, position="baseline")
        history.baseline = baseline
        history.next_id = 1 + max((int(i[1:]) for i in ids), default=0)
        return history

    @property
    def notebook(self) -> str:
        """The name of the notebook this history belongs to."""
        return self.path.name.removesuffix(".history.json")

    def to_dict(self) -> dict[str, object]:
        """The saved history: the document :class:`perflab.model.saved.HistoryDoc`
        declares."""
        from perflab.model.saved import HistoryDoc
        from perflab.model.schema import encode

        entries = [_entry_doc(e) for e in self.entries]
        return encode(HistoryDoc(notebook=self.notebook, baseline=self.baseline, entries=entries))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        dump_json(KIND, self.to_dict(), self.path)

    def add(self, result: TimingResult) -> HistoryEntry:
        entry = HistoryEntry(f"r{self.next_id}", result)
        self.next_id += 1
        self.entries.append(entry)
        while len(self.entries) > MAX_RESULTS:
            dropped = self.entries.pop(0)
            if dropped.id == self.baseline:
                self.baseline = None
        return entry

    def get(self, entry_id: object) -> HistoryEntry:
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        raise InputError(f"no result {entry_id!r} in the history")

    def set_baseline(self, entry_id: object) -> None:
        self.baseline = None if entry_id is None else self.get(entry_id).id

    def rows(self) -> list[HistoryRow]:
        return [e.row() for e in self.entries]

    def csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for e in self.entries:
            row = e.row()
            writer.writerow(
                [
                    e.id,
                    row["name"],
                    repr(row["median_ns"]),
                    *(repr(v) for v in row["ci95_ns"]),
                    row["n"],
                    row["backend"],
                    row["device"],
                    row["created"],
                    "yes" if e.id == self.baseline else "",
                    "; ".join(row["warnings"]),
                ]
            )
        return out.getvalue()


def _entry(item: object, source: str, index: int) -> HistoryEntry:
    where = f"entries[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("result"), dict):
        raise SchemaError("expected {id, result}", source=source, position=where)
    entry_id = item.get("id")
    if not isinstance(entry_id, str) or not _ID.fullmatch(entry_id):
        raise SchemaError(f"bad id {entry_id!r}", source=source, position=where)
    # TimingResult checks every field of a result (types, finiteness, ranges)
    result = TimingResult.from_dict(item["result"], source=f"{source} {where}.result")
    # a replay's origin lives beside the result: the result file format has no field for it
    replayed_from = item.get("replayed_from")
    if replayed_from is not None and (
        not isinstance(replayed_from, str) or not 0 < len(replayed_from) <= MAX_TEXT
    ):
        raise SchemaError(f"bad replayed_from {replayed_from!r:.80}", source=source, position=where)
    result.replayed_from = replayed_from
    return HistoryEntry(entry_id, result)


def _entry_doc(entry: HistoryEntry) -> HistoryEntryDoc:
    from msgspec import UNSET

    from perflab.model.saved import HistoryEntryDoc

    replayed_from = entry.result.replayed_from
    return HistoryEntryDoc(
        id=entry.id,
        result=entry.result.document(),
        replayed_from=UNSET if replayed_from is None else replayed_from,
    )


def perflab_info() -> dict[str, object]:
    """What ``perflab info --json`` prints, run in this process."""
    from perflab.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["info", "--json"])
    if code != 0:
        raise PerflabError(f"perflab info failed: {err.getvalue().strip()}")
    doc: dict[str, object] = json.loads(out.getvalue())
    return doc


class Bridge:
    """The history of one notebook and the comms of the extension that show it."""

    def __init__(self, history: History, note: str | None = None) -> None:
        self.history = history
        self.note = note
        self.comms: list[BaseComm] = []

    def snapshot(self) -> dict[str, object]:
        return {
            "type": "history",
            "notebook": self.history.notebook,
            "rows": self.history.rows(),
            "baseline": self.history.baseline,
            "note": self.note,
        }

    def on_result(self, result: object) -> None:
        if not isinstance(result, TimingResult):
            return
        entry = self.history.add(result)
        self.history.save()
        self.broadcast({"type": "added", "row": entry.row(), "baseline": self.history.baseline})

    def handle(self, data: object) -> dict[str, object]:
        """The answer to one request of the panel (a dict with ``type`` and ``request``)."""
        if not isinstance(data, dict):
            return {"type": "error", "message": "a request must be an object"}
        request = data.get("request")
        try:
            return {"request": request, **self._answer(data)}
        except PerflabError as exc:
            return {"type": "error", "request": request, "message": str(exc)}
        except Exception as exc:  # the panel waits for an answer to every request, so even a
            # fault of perflab's own gets one; a traceback is no message for the panel
            _log.debug("request %r failed", data, exc_info=True)
            return {"type": "error", "request": request, "message": _fault(data, exc)}

    def _answer(self, data: Mapping[str, object]) -> Mapping[str, object]:
        kind = data.get("type")
        if kind == "compare":
            result = self.history.get(data.get("a")).result
            base = self.history.get(data.get("b")).result
            cmp = result.compare(base)
            return {"type": "comparison", **cmp.to_dict(), "verdict": cmp.verdict, "text": str(cmp)}
        if kind == "baseline":
            self.history.set_baseline(data.get("id"))
            self.history.save()
            self.broadcast(self.snapshot())
            return {"type": "ok"}
        if kind == "export":
            fmt = data.get("format")
            stem = self.history.notebook.removesuffix(".ipynb")
            if fmt == "csv":
                return _export("csv", f"{stem}-perf-history.csv", self.history.csv())
            if fmt == "json":
                self.history.save()
                text = self.history.path.read_text(encoding="utf-8")
                return _export("json", f"{stem}-perf-history.json", text)
            raise InputError(f"export format must be csv or json, not {fmt!r}")
        if kind == "info":
            return {"type": "info", "doc": perflab_info()}
        if kind == "history":
            return self.snapshot()
        raise InputError(f"unknown request {kind!r}")

    def broadcast(self, message: dict[str, object]) -> None:
        for comm in list(self.comms):
            comm.send(message)

    def open_comm(self, comm: BaseComm, _open_msg: Mapping[str, object]) -> None:
        self.comms.append(comm)
        comm.on_msg(self._receiver(comm))
        comm.on_close(lambda _msg: self._forget(comm))
        comm.send(self.snapshot())

    def _forget(self, comm: BaseComm) -> None:
        if comm in self.comms:
            self.comms.remove(comm)

    def _receiver(self, comm: BaseComm) -> Callable[[object], None]:
        def receive(msg: object) -> None:
            content = msg.get("content") if isinstance(msg, dict) else None
            comm.send(self.handle(content.get("data") if isinstance(content, dict) else None))

        return receive


_bridge: Bridge | None = None


def connect(notebook: str, renamed_from: str | None = None) -> Bridge:
    """Make this kernel ready for the extension: open the history of ``notebook`` (a file
    name in the kernel's working directory, where Jupyter starts the kernel of a notebook)
    and listen on the comm target. ``renamed_from``: the notebook's name before a rename;
    its history goes with it unless the new name already has one. The user's shell is left
    as it was (no magics are loaded)."""
    global _bridge
    # not resolved: a history file that is a symbolic link is judged as the link it is
    path = history_path(notebook, Path.cwd())
    if renamed_from is not None and _bridge is not None:
        _follow_rename(_bridge.history, history_path(renamed_from, Path.cwd()), path)
    if _bridge is None or _bridge.history.path != path:
        if _bridge is not None:
            listeners.remove_listener(_bridge.on_result)
        _bridge = Bridge(*History.open(path))
        listeners.add_listener(_bridge.on_result)
    from comm import get_comm_manager

    get_comm_manager().register_target(COMM_TARGET, _bridge.open_comm)
    return _bridge


# the first line of a cell that is a %%gpuprofile cell, after any blank lines
_GPUPROFILE_LINE = re.compile(r"\A(?:[ \t]*\n)*[ \t]*%%gpuprofile(?![\w])(?P<options>[^\n]*)\n?")
_profiler: GpuProfileMagics | None = None


def profile_cell(ip: InteractiveShell, source: str) -> TimingResult | None:
    """Run the cell ``source`` in ``ip`` as ``%%gpuprofile`` with default options would (with
    its own options when its first line is ``%%gpuprofile ...``): what the profile button
    does. It goes through the magic's own code, output and errors included, but registers
    no magic: a kernel that never ran ``%load_ext perflab`` still has no ``%%gpuprofile``.
    Returns what the magic returns (the result with ``-o``, else None)."""
    from perflab.magics import help_requested
    from perflab.magics.gpuprofile import PerflabUsageError

    header = _GPUPROFILE_LINE.match(source)
    line, body = "", source
    if header is not None:
        # as IPython expands a magic's line: $name and {expr} in the user's namespace
        line = str(ip.var_expand(header["options"], 1))  # type: ignore[no-untyped-call]
        body = source[header.end() :]
    if not body.strip() and not help_requested(line):
        raise PerflabUsageError("the cell is empty: there is nothing to time")
    magics = _profiler_of(ip)
    magics.header_lines = 0 if header is None else source[: header.end()].count("\n")
    result = magics.gpuprofile(line, body)
    return result if isinstance(result, TimingResult) else None


def _profiler_of(ip: InteractiveShell) -> GpuProfileMagics:
    """The ``%%gpuprofile`` magics object the button uses in ``ip``, made once (IPython keeps
    every one made in the shell's configurables), never registered in its magics table."""
    global _profiler
    if _profiler is None or _profiler.shell is not ip:
        from perflab.magics.gpuprofile import GpuProfileMagics

        _profiler = GpuProfileMagics(shell=ip)
    return _profiler


def _follow_rename(history: History, old: Path, new: Path) -> None:
    if history.path != old or new.exists():
        return
    if old.exists():
        old.replace(new)
    history.path = new


def _fault(data: Mapping[str, object], exc: Exception) -> str:
    """A short answer to a request that failed by perflab's own fault: the request and the
    kind of failure, no traceback."""
    kind = data.get("type")
    named = f"the {kind!r} request" if isinstance(kind, str) and len(kind) <= 40 else "a request"
    return f"perflab could not answer {named}: an internal error ({type(exc).__name__})"


def _export(fmt: str, filename: str, text: str) -> dict[str, str]:
    return {"type": "export", "format": fmt, "filename": filename, "text": text}

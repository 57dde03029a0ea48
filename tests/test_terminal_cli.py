"""Every perflab command, given files whose names carry what a terminal acts on (ESC
sequences, BEL, NUL, bidirectional overrides and isolates) in kernel, op, thread, range and
file names, prints none of it raw, on stdout or stderr: the CLI's streams escape whatever a
view, a message or a warning writes (see perflab.cli.TerminalStream)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from data_paths import TRACES
from kineto_gen import injected_trace, memory_document, memory_trace

from perflab.cli import TerminalStream, build_parser, main, terminal_streams
from perflab.io import _progress
from perflab.model.machine import BenchResult, Series
from perflab.render.html import UNSAFE_TEXT

# clears the screen, recolours, retitles the window, rings the bell, reverses and isolates
# what follows, and ends the C string
HOSTILE = "\x1b[2J\x1b[31m\x1b]0;owned\x07\u202e\u2066\x00"
ESCAPED = r"\x1b[2J\x1b[31m\x1b]0;owned\x07\u202e\u2066\x00"
IN_PATH = HOSTILE.replace("\x00", "")  # a file name cannot hold a NUL
PATH_ESCAPED = ESCAPED.removesuffix(r"\x00")
NAMED = ("kernel", "cpu_op", "python_function", "gpu_memcpy", "user_annotation")


def acted_on(text: str) -> list[str]:
    """What a terminal would act on in ``text``, the lines and tabs of a layout aside."""
    return [c for c in text if c not in "\n\t" and UNSAFE_TEXT.match(c)]


def hostile_trace(path: Path, seed: int = 1) -> Path:
    """A Kineto trace whose kernels, ops, Python functions, copies, ranges and main thread
    carry :data:`HOSTILE` in their names (ProfilerStep ranges keep theirs: steps are found
    by them)."""
    doc = injected_trace(seed=seed).doc
    for event in doc["traceEvents"]:
        if event["cat"] in NAMED and not event["name"].startswith("ProfilerStep"):
            event["name"] += HOSTILE
    thread = {"name": f"main{HOSTILE}"}
    doc["traceEvents"].append(
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 101, "args": thread}
    )
    path.write_text(json.dumps(doc))
    return path


def hostile_memory(path: Path) -> Path:
    """A trace of the allocator's memory events whose ops and ranges carry HOSTILE."""
    doc = memory_document(memory_trace(steps=3))
    for event in doc["traceEvents"]:
        if event.get("cat") in NAMED and not event["name"].startswith("ProfilerStep"):
            event["name"] += HOSTILE
    path.write_text(json.dumps(doc))
    return path


def hostile_snapshot(path: Path) -> Path:
    """A CUDA memory snapshot (a pickle of plain values) whose stack names HOSTILE."""
    import pickle

    frames = [{"filename": f"train{HOSTILE}.py", "line": 3, "name": f"forward{HOSTILE}"}]
    block = {"address": 0, "size": 512, "state": "active_allocated", "frames": frames}
    segment = {"address": 0, "total_size": 512, "stream": 0, "blocks": [block]}
    path.write_bytes(pickle.dumps({"segments": [segment], "device_traces": []}, protocol=4))
    return path


def hostile_job(directory: Path) -> Path:
    """Two ranks of the hostile trace (one under a hostile file name) and a FIFO named like
    a third, which the summary's warnings name."""
    directory.mkdir()
    hostile_trace(directory / "rank-0.json")
    hostile_trace(directory / f"rank-1{IN_PATH}.json", seed=2)
    os.mkfifo(directory / f"rank-2{IN_PATH}.json")
    return directory


def hostile_ncu(path: Path) -> Path:
    """The stored ncu CSV with a hostile kernel name."""
    with (TRACES / "ncu" / "copy_blocked.csv").open(newline="") as fh:
        header, *rows = csv.reader(line for line in fh if not line.startswith("=="))
    at = header.index("Kernel Name")
    for row in rows:
        row[at] = f"copy{HOSTILE}"
    with path.open("w", newline="") as fh:
        csv.writer(fh).writerows([header, *rows])
    return path


def hostile_bench(path: Path) -> Path:
    """A saved launch result whose device, warning and series names are hostile."""
    series = Series(f"python call{HOSTILE}", x=[1, 100], y=[6.8, 6.6], x_unit="calls", y_unit="us")
    result = BenchResult(
        "launch", f"CPU{HOSTILE}", "cpu", warnings=[f"w{HOSTILE}"], series=[series]
    )
    return result.save(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    return {
        "trace": hostile_trace(root / "trace.json"),
        "other": hostile_trace(root / "other.json", seed=3),
        "job": hostile_job(root / "job"),
        "memory": hostile_memory(root / "memory.json"),
        "snapshot": hostile_snapshot(root / "snapshot.pickle"),
        "ncu": hostile_ncu(root / "report.csv"),
        "bench": hostile_bench(root / "launch.json"),
        "out": root / f"out{IN_PATH}",
    }


Argv = Callable[[dict[str, Path]], list[str]]
# each command and subcommand, with what shows a hostile name in its output (None: it shows
# no name from a file, only that nothing raw reaches the terminal is checked)
RUNS: dict[str, tuple[Argv, str | None]] = {
    "trace summary": (lambda f: ["trace", "summary", str(f["trace"])], None),
    "trace summary --json": (lambda f: ["trace", "summary", str(f["trace"]), "--json"], None),
    "trace kernels": (lambda f: ["trace", "kernels", str(f["trace"])], ESCAPED),
    "trace kernels --json": (lambda f: ["trace", "kernels", str(f["trace"]), "--json"], None),
    "trace idle": (lambda f: ["trace", "idle", str(f["trace"])], ESCAPED),
    "trace idle --json": (lambda f: ["trace", "idle", str(f["trace"]), "--json"], None),
    "trace critical": (lambda f: ["trace", "critical", str(f["trace"])], ESCAPED),
    "trace critical --json": (lambda f: ["trace", "critical", str(f["trace"]), "--json"], None),
    "trace critical of a job": (lambda f: ["trace", "critical", str(f["job"])], ESCAPED),
    "trace diff": (lambda f: ["trace", "diff", str(f["trace"]), str(f["other"])], ESCAPED),
    "trace diff --json": (
        lambda f: ["trace", "diff", str(f["trace"]), str(f["other"]), "--json"],
        None,
    ),
    "trace memory": (lambda f: ["trace", "memory", str(f["memory"])], ESCAPED),
    "trace memory --json": (lambda f: ["trace", "memory", str(f["memory"]), "--json"], None),
    "trace memory of a snapshot": (lambda f: ["trace", "memory", str(f["snapshot"])], ESCAPED),
    "trace sql": (
        lambda f: [
            "trace",
            "sql",
            str(f["trace"]),
            "SELECT DISTINCT name, track_label FROM events",
        ],
        ESCAPED,
    ),
    "trace sql --csv": (
        lambda f: ["trace", "sql", str(f["trace"]), "SELECT DISTINCT name FROM events", "--csv"],
        ESCAPED,
    ),
    "trace sql --json": (
        lambda f: ["trace", "sql", str(f["trace"]), "SELECT DISTINCT name FROM events", "--json"],
        None,
    ),
    "trace sql, an error naming the query": (
        lambda f: ["trace", "sql", str(f["trace"]), f"SELECT {HOSTILE}"],
        None,
    ),
    "trace export": (
        lambda f: ["trace", "export", str(f["trace"]), "-o", f"{f['out']}.json"],
        PATH_ESCAPED,
    ),
    "trace summary of a job": (lambda f: ["trace", "summary", str(f["job"])], PATH_ESCAPED),
    "trace kernels of a job": (lambda f: ["trace", "kernels", str(f["job"])], ESCAPED),
    "trace sql of a job": (
        lambda f: ["trace", "sql", str(f["job"]), "SELECT DISTINCT name FROM kernels"],
        ESCAPED,
    ),
    "timeline": (
        lambda f: ["timeline", str(f["trace"]), "-o", f"{f['out']}.html"],
        PATH_ESCAPED,
    ),
    "timeline of a job": (
        lambda f: ["timeline", str(f["job"]), "-o", f"{f['out']}-job.html"],
        PATH_ESCAPED,
    ),
    "roofline --ncu": (
        lambda f: [
            "roofline",
            "--device",
            "H200",
            "--ncu",
            str(f["ncu"]),
            "-o",
            f"{f['out']}-roofline.html",
            "--text",
        ],
        ESCAPED,
    ),
    "machine launch --replay": (
        lambda f: ["machine", "launch", "--replay", str(f["bench"])],
        ESCAPED,
    ),
    "time": (
        lambda f: ["time", "x = 1", "--name", HOSTILE, "--backend", "cpu", "--budget", "5"],
        ESCAPED,
    ),
    "a missing file": (lambda f: ["trace", "summary", f"{f['out']}-gone.json"], PATH_ESCAPED),
    "compile of a missing file": (lambda f: ["compile", f"{f['out']}.cu"], PATH_ESCAPED),
    "an argument that is not one": (
        lambda f: ["trace", "sql", str(f["trace"]), "SELECT 1", "--timeout", HOSTILE],
        None,
    ),
    "info": (lambda f: ["info"], None),
    "exercises list": (lambda f: ["exercises", "list"], None),
}


@pytest.mark.parametrize("run", list(RUNS))
def test_nothing_a_terminal_acts_on_is_printed_raw(
    run: str, files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, shown = RUNS[run]
    with contextlib.suppress(SystemExit):  # argparse's refusal of a bad argument
        main(argv(files))
    out, err = capsys.readouterr()
    assert not acted_on(out), (run, acted_on(out))
    assert not acted_on(err), (run, acted_on(err))
    if shown is not None:
        assert shown in out + err, (run, out[-2000:], err[-2000:])


def test_every_command_is_run_above() -> None:
    """A new command or subcommand needs a run in RUNS."""
    commands = set()
    for name, parser in _subparsers(build_parser()).items():
        subcommands = _subparsers(parser)
        commands |= {f"{name} {sub}" for sub in subcommands} if subcommands else {name}
    covered = {" ".join(RUNS[run][0]({k: Path(k) for k in FILE_KEYS})[:2]) for run in RUNS}
    covered |= {RUNS[run][0]({k: Path(k) for k in FILE_KEYS})[0] for run in RUNS}
    missing = commands - covered - NOT_RUN
    assert not missing, missing


FILE_KEYS = ("trace", "other", "job", "memory", "snapshot", "ncu", "bench", "out")
NOT_RUN = {
    "ptx",  # the same command as compile
    # measurements of the machine print only their own numbers and the device's name (the
    # replay above shows how a result is printed, hostile names included)
    "machine latency",
    "machine bandwidth",
    "machine matmul",
    "machine h2d",
    "machine collectives",
    "machine topology",
    "ceilings",
}


def _subparsers(parser: object) -> dict[str, object]:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# -- the streams themselves ------------------------------------------------------------------


def test_no_character_a_terminal_acts_on_is_printable() -> None:
    """TerminalStream passes a printable line as it is: that is safe only while this holds."""
    acting = [c for c in map(chr, range(sys.maxunicode + 1)) if UNSAFE_TEXT.match(c)]
    assert len(acting) > 60 and not [c for c in acting if c.isprintable()]


def test_terminal_stream_escapes_and_keeps_the_layout() -> None:
    sink = io.StringIO()
    stream = TerminalStream(sink)
    stream.write("name\tcalls\n")
    stream.write(f"gemm{HOSTILE}\t3\r\n")
    assert sink.getvalue() == f"name\tcalls\ngemm{ESCAPED}\t3\\x0d\n"


def test_a_progress_line_redraws_on_the_terminal_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    clock = iter([0.0, 5.0, 6.0]).__next__
    with terminal_streams(), _progress.Progress(f"reading {HOSTILE}", 100, clock=clock) as shown:
        shown.update(50)
    drawn = terminal.getvalue()
    assert drawn.startswith(f"\rreading {ESCAPED}:  50%") and not acted_on(drawn.replace("\r", ""))

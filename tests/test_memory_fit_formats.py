"""The fit check for every format: an Nsight Systems export (its rows, read from each table's
largest rowid), a saved trace (.npz: its arrays' sizes from the archive's directory) and a job
(a directory of rank files: held at once here, or a rank at a time per worker with
``--scheduler local:N``) are refused before they are read when their estimated peak is over
``--memory-budget``, with perflab's error naming the need, the budget and what works instead;
within the budget they read as before. The estimates are checked against the peak memory of
real processes on files scaled up from the test data."""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from data_paths import ROOT, TRACES

from perflab.cli import main
from perflab.commands import _fit
from perflab.io import load_trace

NSYS = TRACES / "nsys" / "power_iteration.sqlite"
ALEXNET = TRACES / "kineto" / "alexnet_a100.json.gz"
ACTIVITY = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "NVTX_EVENTS",
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "alexnet.npz"
    load_trace(ALEXNET).save(path)
    return path


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ranks of saved traces."""
    folder = tmp_path_factory.mktemp("job")
    trace = load_trace(ALEXNET)
    for rank in (0, 1):
        trace.meta.update(rank=rank, world_size=2)
        trace.save(folder / f"rank-{rank}.npz")
    return folder


def _never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("read although it does not fit")

    for loader in ("perflab.io.nsys.load_nsys", "perflab.model.trace.Trace.load"):
        monkeypatch.setattr(loader, refuse)
    monkeypatch.setattr("perflab.io.job.load_job", refuse)


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*argv, "--memory-budget", "1K"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error: ")
    assert "more than --memory-budget 1K (0.001 MB)" in err
    return err


def test_an_nsys_export_is_refused_on_its_rows(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _never_read(monkeypatch)
    err = _refused(["trace", "summary", str(NSYS), "--json"], capsys)
    assert f"{NSYS}: this trace needs about 0.2 GB of memory for 'perflab trace summary'" in err
    assert "(13,285 rows)" in err  # the tables read (their largest rowids), StringIds too
    assert "What works instead: export a shorter capture" in err


def test_a_saved_trace_is_refused_on_its_arrays(
    saved: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _never_read(monkeypatch)
    err = _refused(["timeline", str(saved), "-o", str(saved.with_suffix(".html"))], capsys)
    assert "this trace needs about 0.2 GB of memory for 'perflab timeline'" in err
    assert "MB of arrays)" in err and "Trace.select(rows).save" in err


@pytest.mark.parametrize("command", [["trace", "summary"], ["trace", "kernels"]])
def test_a_job_is_refused_on_all_its_ranks(
    command: list[str],
    job: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _never_read(monkeypatch)
    err = _refused([*command, str(job)], capsys)
    assert f"{job}: this job needs about" in err
    assert "(2 files: " in err and "--scheduler local:N" in err


def test_a_job_timeline_is_refused(
    job: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _never_read(monkeypatch)
    err = _refused(["timeline", str(job), "-o", str(tmp_path / "t.html")], capsys)
    assert "this job needs about" in err and "for 'perflab timeline'" in err


def test_a_job_held_at_once_needs_what_its_ranks_need_together(job: Path) -> None:
    """Held here: the ranks' needs add up (the interpreter counted once); on N local
    workers: the N largest, each in its own process, and this one."""
    one = _fit.file_need(str(job / "rank-0.npz"), "summary")
    assert one is not None
    args = argparse.Namespace(file=str(job), more=[], command="trace", trace_command="summary")
    need_here = _fit.together([one, one])
    assert need_here == 2 * one.bytes - _fit.BASE_BYTES
    args.memory_budget = str(need_here - 1)
    with pytest.raises(_fit.InputError, match="this job needs about"):
        _fit.check_fits(args)
    args.memory_budget = str(need_here)
    _fit.check_fits(args)
    args.scheduler = "local:1"  # a rank at a time: the largest, and this process
    assert _fit.together([one, one], 1) == one.bytes + _fit.BASE_BYTES
    args.memory_budget = str(one.bytes + _fit.BASE_BYTES - 1)
    with pytest.raises(_fit.InputError, match=r"fewer worker processes \(--scheduler local:M"):
        _fit.check_fits(args)
    args.scheduler = "tcp://somewhere:8786"  # another machine's memory: not checked here
    _fit.check_fits(args)


@pytest.mark.parametrize("kind", ["nsys", "saved", "job"])
def test_within_the_budget_they_read_as_before(
    kind: str, saved: Path, job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = {"nsys": NSYS, "saved": saved, "job": job}[kind]
    assert main(["trace", "summary", str(path), "--json"]) == 0
    plain = capsys.readouterr().out
    assert main(["trace", "summary", str(path), "--json", "--memory-budget", "64G"]) == 0
    assert capsys.readouterr().out == plain


def test_damaged_files_are_left_to_the_reader(tmp_path: Path) -> None:
    """No estimate for what is not a database or an archive: reading it says what is wrong."""
    for name in ("bad.sqlite", "bad.npz"):
        path = tmp_path / name
        magic = b"SQLite format 3\x00" if name.endswith("sqlite") else b"PK\x03\x04"
        path.write_bytes(magic + b"\x00" * 200)
        assert _fit.file_need(str(path), "summary") is None


def test_a_view_in_place_of_a_table_is_not_asked(tmp_path: Path) -> None:
    """A view's rows would be computed by the file's SQL: the estimate leaves it out."""
    path = tmp_path / "view.sqlite"
    shutil.copy(NSYS, path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
        db.execute("CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM StringIds")
    rows = _fit.nsys_rows(str(path))
    assert rows is not None and "CUPTI_ACTIVITY_KIND_KERNEL" not in rows
    assert rows["CUPTI_ACTIVITY_KIND_RUNTIME"] == 7417


# -- the estimates against real processes -------------------------------------------------------

PEAK = """
import contextlib, io, resource, sys
from perflab.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    assert main(sys.argv[1:]) == 0
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(int(hwm[0].split()[1]) * 1024 + kids * 1024)
"""


def _peak(*argv: str) -> int:
    """Peak memory of a whole ``perflab`` process (its own, plus its largest child's)."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK, *argv, "--memory-budget", "64G"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        check=True,
    )
    return int(done.stdout.split()[-1])


def _scaled_export(path: Path, copies: int) -> Path:
    """The test export with its activity rows repeated ``copies`` times, each copy later by
    the span of the first (the shape of a longer capture)."""
    shutil.copy(NSYS, path)
    with sqlite3.connect(path) as db:
        lo, hi = db.execute(
            "SELECT min(start), max(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME"
        ).fetchone()
        for table in ACTIVITY:
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            shifted = ", ".join(f"{c} + ?" if c in ("start", "end") else c for c in columns)
            (rows,) = db.execute(f"SELECT max(rowid) FROM {table}").fetchone()
            for k in range(1, copies):
                offset = k * (hi - lo + 1000)
                db.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) SELECT {shifted} "
                    f"FROM {table} WHERE rowid <= ?",
                    (offset, offset, rows),
                )
    return path


MEASURED_FACTOR = 1.6  # each estimate is above the measured growth and within this of it


def _check_growth(small: Path, big: Path, command: str = "summary") -> None:
    """From ``small`` to ``big``, the estimate grows by more than the measured peak of
    ``perflab trace COMMAND`` does, and by less than MEASURED_FACTOR times as much (the
    interpreter's own memory, which the estimate takes generously, drops out)."""
    grown = _peak("trace", command, str(big), "--json") - _peak(
        "trace", command, str(small), "--json"
    )
    need, base = _fit.file_need(str(big), command), _fit.file_need(str(small), command)
    assert need is not None and base is not None
    estimate = need.bytes - base.bytes
    print(f"{big.name}: measured growth {grown / 1e6:.0f} MB, estimated {estimate / 1e6:.0f} MB")
    assert grown < estimate < MEASURED_FACTOR * grown, (grown, estimate)


@pytest.mark.slow
def test_the_nsys_estimate_against_a_measured_load(tmp_path: Path) -> None:
    """40x the test export's rows (480k)."""
    _check_growth(NSYS, _scaled_export(tmp_path / "x40.sqlite", 40))


@pytest.mark.slow
def test_the_saved_trace_estimate_against_a_measured_load(tmp_path: Path) -> None:
    """A saved trace of 600x alexnet's events (520k) against one of alexnet's."""
    trace = load_trace(ALEXNET)
    small, big = tmp_path / "one.npz", tmp_path / "many.npz"
    trace.save(small)
    type(trace).merge([trace] * 600).save(big)
    _check_growth(small, big)

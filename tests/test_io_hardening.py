"""Reproducers of bad input found by fuzzing and attack runs, each now a perflab error (naming
the file and the place) or a correct result; and the bounds on what a load may cost."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from data_paths import TRACES
from test_io_kineto_parallel import InProcessHelper

from perflab.analysis.trace_intervals import exact_sum
from perflab.cli import main
from perflab.errors import InputError, SchemaError
from perflab.io import (
    _common,
    _parallel,
    _progress,
    _tempdirs,
    export_chrome,
    load_ncu,
    load_trace,
)
from perflab.io.kineto import fast as _kineto_fast
from perflab.io.kineto import load as kineto
from perflab.model import serialize
from perflab.model.trace import Trace

NSYS = TRACES / "nsys" / "power_iteration.sqlite"
NCU = TRACES / "ncu" / "copy_blocked.csv"
KINETO = TRACES / "kineto" / "triton_example_a100.json.gz"


def _kernel(**kw: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 10.0,
        "dur": 2.0,
        "args": {"device": 0, "stream": 7, "correlation": 5},
    }
    event.update(kw)
    return event


def _write(tmp_path: Path, doc: Any, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


# -- raw Python errors that are now perflab errors --------------------------------------------


def test_kineto_args_nested_1000_deep(tmp_path: Path) -> None:
    deep = "[" * 1000 + "]" * 1000
    text = json.dumps({"traceEvents": [_kernel(args={"x": "@"})]}).replace('"@"', deep)
    path = tmp_path / "deep.json"
    path.write_text(text)
    with pytest.raises(InputError, match="nested too deeply") as info:
        load_trace(path)
    assert str(path) in str(info.value)


def _nsys_copy(tmp_path: Path, *statements: tuple[str, tuple[Any, ...]]) -> Path:
    path = tmp_path / "t.sqlite"
    shutil.copy(NSYS, path)
    with sqlite3.connect(path) as db:
        for sql, values in statements:
            db.execute(sql, values)
    return path


def test_nsys_nvtx_text_stored_as_blob(tmp_path: Path) -> None:
    path = _nsys_copy(
        tmp_path,
        ("UPDATE NVTX_EVENTS SET text = ?, textId = NULL", (b"nccl range \xff",)),
        ("UPDATE StringIds SET value = ? WHERE id = (SELECT min(id) FROM StringIds)", (b"x",)),
    )
    trace = load_trace(path)
    assert "nccl range \ufffd" in trace.strings  # decoded leniently, like damaged TEXT
    str(trace.summary())


def test_nsys_infinite_device_property_saves_and_exports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _nsys_copy(tmp_path, ("UPDATE TARGET_INFO_GPU SET clockRate = ?", (float("inf"),)))
    trace = load_trace(path)
    assert all("clockRate" not in d for d in trace.meta["devices"])
    assert Trace.load(trace.save(tmp_path / "t.npz")).meta == trace.meta
    assert main(["trace", "export", str(path), "-o", str(tmp_path / "out.json")]) == 0
    json.loads((tmp_path / "out.json").read_text())  # standard JSON, no Infinity


def test_trace_save_drops_non_finite_meta(tmp_path: Path) -> None:
    trace = load_trace(KINETO)
    trace.meta["devices"] = [{"id": 0, "clock": float("inf")}]
    back = Trace.load(trace.save(tmp_path / "t.npz"))
    assert back.meta["devices"] == [{"id": 0, "clock": None}]
    export_chrome(trace, tmp_path / "t.json")


def _ncu_with(tmp_path: Path, metric: str, value: str) -> Path:
    """The stored ncu CSV with ``metric``'s value replaced by ``value``."""
    rows = list(csv.reader(io.StringIO(NCU.read_text(encoding="utf-8"))))
    name, column = rows[0].index("Metric Name"), rows[0].index("Metric Value")
    for row in rows[1:]:
        if len(row) > column and row[name] == metric:
            row[column] = value
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL).writerows(rows)
    path = tmp_path / "r.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


@pytest.mark.parametrize("text", ["inf", "nan", "1_000", "１２３", "٣"])
def test_ncu_values_that_are_not_ncu_numbers_stay_text(tmp_path: Path, text: str) -> None:
    report = load_ncu(_ncu_with(tmp_path, "Duration", text))
    duration = report.metric("Duration")
    assert duration.value is None and duration.text == text
    from perflab.render.roofline import points_from_ncu

    points_from_ncu(report)  # no kernel with a duration: nothing to plot, no ValueError


def test_ncu_number_out_of_range_names_the_line(tmp_path: Path) -> None:
    path = _ncu_with(tmp_path, "Duration", "1e400")
    with pytest.raises(InputError, match=r"out of range") as info:
        load_ncu(path)
    assert str(path) in str(info.value) and "line " in str(info.value)


def test_ncu_thousands_commas_still_parse(tmp_path: Path) -> None:
    report = load_ncu(_ncu_with(tmp_path, "Duration", "1,234.5"))
    assert report.metric("Duration").value == 1234.5


def test_ncu_duplicated_header_column(tmp_path: Path) -> None:
    lines = NCU.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0].replace('"Rule Name"', '"Metric Value"', 1)
    path = tmp_path / "dup.csv"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(InputError, match="'Metric Value' appears twice") as info:
        load_ncu(path)
    assert "line 1" in str(info.value)


# -- saved traces ------------------------------------------------------------------------------


def _members(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    with zipfile.ZipFile(path) as z:
        return {n[:-4]: np.load(z.open(n), allow_pickle=False) for n in z.namelist()}


def _resave(path: Path, members: dict[str, Any], header: dict[str, Any] | None = None) -> Path:
    if header is not None:
        members = {**members, "header": np.frombuffer(json.dumps(header).encode(), np.uint8)}
    with open(path, "wb") as fh:
        np.savez(fh, **members)
    return path


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    return load_trace(KINETO).save(tmp_path / "saved.npz")


def test_saved_trace_with_a_flipped_byte(saved: Path) -> None:
    data = bytearray(saved.read_bytes())
    messages = []
    for offset in range(100, len(data) - 100, max(len(data) // 40, 1)):
        damaged = bytearray(data)
        damaged[offset] ^= 0x10
        saved.write_bytes(bytes(damaged))
        try:
            Trace.load(saved)
        except SchemaError as exc:
            messages.append(str(exc))
    assert len(messages) > 10
    assert all(str(saved) in message for message in messages)


def test_saved_trace_with_a_deeply_nested_header(saved: Path, tmp_path: Path) -> None:
    members = _members(saved)
    text = (
        members["header"]
        .tobytes()
        .replace(b'"meta": {', b'"meta": {"x": ' + b"[" * 5000 + b"]" * 5000 + b", ", 1)
    )
    members["header"] = np.frombuffer(text, np.uint8)
    path = _resave(tmp_path / "deep.npz", members)
    with pytest.raises(SchemaError, match="nested") as info:
        Trace.load(path)
    assert str(path) in str(info.value)


def _fake_npy(shape: tuple[int, ...]) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": "<i8", "fortran_order": False, "shape": shape}
    )
    return out.getvalue() + b"\0" * 64


def _zip_with(path: Path, members: dict[str, Any], fake: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, values in members.items():
            buf = io.BytesIO()
            np.save(buf, values, allow_pickle=False)
            z.writestr(name + ".npy", buf.getvalue())
        for name, data in fake.items():
            z.writestr(name + ".npy", data)
    return path


def test_saved_array_claiming_a_huge_shape(saved: Path, tmp_path: Path) -> None:
    members = _members(saved)
    del members["events.start_ns"]
    path = _zip_with(tmp_path / "huge.npz", members, {"events.start_ns": _fake_npy((10**11,))})
    with pytest.raises(SchemaError, match="claims 100000000000 values") as info:
        Trace.load(path)
    assert "events.start_ns" in str(info.value)


def test_members_the_schema_does_not_name_are_never_read(
    saved: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = _members(saved)
    path = _zip_with(tmp_path / "extra.npz", members, {"unused": _fake_npy((4 * 10**8,))})
    read: list[str] = []
    real = serialize._read_member

    def spy(archive: Any, info: zipfile.ZipInfo, *args: Any) -> Any:
        read.append(info.filename)
        return real(archive, info, *args)

    monkeypatch.setattr(serialize, "_read_member", spy)
    assert len(Trace.load(path)) == len(load_trace(KINETO))
    assert "unused.npy" not in read and "events.start_ns.npy" in read


def test_saved_trace_with_negative_duration(saved: Path, tmp_path: Path) -> None:
    members = _members(saved)
    members["events.dur_ns"] = members["events.dur_ns"].copy()
    members["events.dur_ns"][3] = -1000
    with pytest.raises(SchemaError, match="negative duration") as info:
        Trace.load(_resave(tmp_path / "neg.npz", members))
    assert "event 3" in str(info.value)


def test_saved_column_of_another_type(saved: Path, tmp_path: Path) -> None:
    members = _members(saved)
    members["events.start_ns"] = members["events.start_ns"].astype(np.float64)
    with pytest.raises(SchemaError, match=r"events\.start_ns"):
        Trace.load(_resave(tmp_path / "float.npz", members))


def test_schema_version_true_is_refused(saved: Path, tmp_path: Path) -> None:
    members = _members(saved)
    header = json.loads(members["header"].tobytes())
    header["schema_version"] = True
    with pytest.raises(SchemaError, match="schema_version True"):
        Trace.load(_resave(tmp_path / "bool.npz", members, header))
    doc = tmp_path / "r.json"
    doc.write_text(json.dumps({"perflab": "timing", "schema_version": True}))
    with pytest.raises(SchemaError, match="schema_version"):
        serialize.load_json("timing", doc)


# -- silently wrong answers ----------------------------------------------------------------


def test_kernels_far_apart_in_time_are_an_input_error(tmp_path: Path) -> None:
    events = [_kernel(ts=-9.1e15), _kernel(ts=9.1e15)]
    with pytest.raises(InputError, match=r"traceEvents\[0\]\).*time window"):
        load_trace(_write(tmp_path, {"traceEvents": events}))


def test_durations_too_long_to_add_are_an_input_error(tmp_path: Path) -> None:
    events = [_kernel(dur=9.1e15), _kernel(dur=9.1e15)]
    with pytest.raises(InputError, match=r"traceEvents\[0\]\).*146 years"):
        load_trace(_write(tmp_path, {"traceEvents": events}))


def test_long_durations_inside_the_window_sum_exactly(tmp_path: Path) -> None:
    dur_us = 4e15  # 4e18 ns each: three of them exceed int64
    events = [_kernel(dur=dur_us, args={"device": 0, "stream": s}) for s in (1, 2, 3)]
    doc = load_trace(_write(tmp_path, {"traceEvents": events})).summary().to_dict()
    assert doc["kernels"]["total_us"] == 3 * dur_us
    assert doc["categories"]["other"]["total_us"] == 3 * dur_us
    (device,) = doc["devices"].values()
    assert device["busy_us"] == dur_us and device["span_us"] == dur_us


def test_exact_sum_does_not_wrap() -> None:
    values = np.array([2**62, 2**62, 2**62, -5, 7], dtype=np.int64)
    assert exact_sum(values) == 3 * 2**62 + 2
    assert np.sum(values) != 3 * 2**62 + 2  # what numpy gives
    assert exact_sum(np.zeros(0, np.int64)) == 0


def test_nsys_kernel_ending_at_int64_max(tmp_path: Path) -> None:
    path = _nsys_copy(
        tmp_path,
        (
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = ? WHERE rowid = "
            "(SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
            (2**63 - 1,),
        ),
    )
    with pytest.raises(InputError, match=r"KERNEL rowid \d+\): end = 9223372036854775807"):
        load_trace(path)


def test_nsys_float_in_an_integer_column(tmp_path: Path) -> None:
    path = _nsys_copy(tmp_path, ("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 1.5", ()))
    with pytest.raises(InputError, match=r"rowid \d+\): gridX = 1\.5"):
        load_trace(path)


def test_devices_that_differ_by_2_to_the_32_stay_apart(tmp_path: Path) -> None:
    events = [
        _kernel(args={"device": 1, "stream": 7}),
        _kernel(ts=20.0, args={"device": 1 + 2**32, "stream": 7}),
    ]
    doc = load_trace(_write(tmp_path, {"traceEvents": events})).summary().to_dict()
    assert sorted(doc["devices"]) == ["1", str(1 + 2**32)]


# -- bounded resources -----------------------------------------------------------------------


def _gzip_of_spaces(path: Path, head: bytes, spaces: int) -> Path:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b" " * (1 << 20)
    with open(path, "wb") as fh:
        fh.write(packer.compress(head))
        for _ in range(spaces >> 20):
            fh.write(packer.compress(chunk))
        fh.write(packer.compress(b"]}") + packer.flush())
    return path


def test_gzip_bomb_is_refused_before_it_is_inflated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_common, "MIN_TEXT_LIMIT", 1 << 20)
    monkeypatch.setattr(_kineto_fast, "HEAD_LIMIT", 1 << 20)
    path = _gzip_of_spaces(tmp_path / "bomb.json.gz", b'{"traceEvents": [', 64 << 20)
    assert path.stat().st_size < (1 << 20)
    with pytest.raises(InputError, match="expands to more than 3 MiB") as info:
        load_trace(path, workers=0)
    assert str(path) in str(info.value)


@pytest.mark.slow
def test_gzip_bomb_peak_memory_is_bounded(tmp_path: Path) -> None:
    """A bomb at full size: 2 MB of gzip holding 2 GiB of text, in a fresh process
    whose peak RSS is read back (the text alone would be 2048 MB). The whole-file read keeps at
    most the 256 MiB cap plus one 16 MiB block before it refuses; the rest is the interpreter
    with numpy and msgspec (about 45 MB)."""
    path = _gzip_of_spaces(tmp_path / "bomb.json.gz", b'{"traceEvents": [', 2 << 30)
    code = (
        "import sys\n"
        "from perflab.io import load_trace\n"
        "from perflab.errors import InputError\n"
        "try:\n    load_trace(sys.argv[1], workers=0)\n"
        "except InputError as exc:\n    print('refused:', exc)\n"
        # VmHWM is this process image's own peak; ru_maxrss after exec starts from the
        # parent's RSS (pytest's, hundreds of MB late in a whole run)
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
        "print(int(hwm[0].split()[1]) // 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300
    )
    refused, peak_mb = done.stdout.strip().splitlines()
    assert refused.startswith("refused:") and "expands to more than" in refused
    print(f"2 GiB gzip bomb ({path.stat().st_size} bytes): refused, peak RSS {peak_mb} MB")
    assert int(peak_mb) < 256 + 16 + 45 + 100


@pytest.mark.parametrize("loader", ["trace", "ncu", "saved", "json"])
def test_devices_are_refused(loader: str) -> None:
    loaders: dict[str, Callable[[str], Any]] = {
        "trace": load_trace,
        "ncu": load_ncu,
        "saved": Trace.load,
        "json": lambda p: serialize.load_json("timing", p),
    }
    load = loaders[loader]
    with pytest.raises(InputError, match="character device") as info:
        load("/dev/zero")
    assert "/dev/zero" in str(info.value)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("loader", ["trace", "kineto", "nsys", "ncu", "ncu-rep", "saved"])
def test_a_fifo_is_refused_not_waited_on(tmp_path: Path, loader: str) -> None:
    from perflab.io.nsys import load_nsys

    fifo = tmp_path / ("pipe.ncu-rep" if loader == "ncu-rep" else "pipe.json")
    os.mkfifo(fifo)
    loaders: dict[str, Callable[[Path], Any]] = {
        "trace": load_trace,
        "ncu-rep": load_ncu,
        "kineto": kineto.load_kineto,
        "nsys": load_nsys,
        "ncu": load_ncu,
        "saved": Trace.load,
    }
    load = loaders[loader]
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            load(fifo)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=30)
    if worker.is_alive():  # unblock it before failing
        with open(fifo, "wb"):
            pass
        pytest.fail("the load waited on the FIFO")
    assert len(outcome) == 1 and isinstance(outcome[0], InputError)
    assert "FIFO" in str(outcome[0]) and str(fifo) in str(outcome[0])


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_stale_load_directories_of_dead_owners_are_removed(tmp_path: Path) -> None:
    prefix = "perflab-load-"
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead_dir = tmp_path / f"{prefix}{_dead_pid()}-abc"
        live_dir = tmp_path / f"{prefix}{alive.pid}-def"
        other = tmp_path / f"{prefix}xyz"  # not named by an owner: left alone
        for d in (dead_dir, live_dir, other):
            d.mkdir()
            (d / "range-0.npz").write_bytes(b"x" * 1000)
        removed = _tempdirs.remove_stale(prefix, tmp_path)
        assert removed == [dead_dir]
        assert not dead_dir.exists() and live_dir.exists() and other.exists()
    finally:
        alive.kill()
        alive.wait()


def test_a_parallel_load_cleans_up_after_a_killed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    stale = tmp_path / f"{kineto.TEMP_PREFIX}{_dead_pid()}-left"
    stale.mkdir()
    trace = load_trace(TRACES / "kineto" / "sampled_4streams.json.gz", workers=1)
    assert len(trace) > 0
    assert not stale.exists()
    assert not list(tmp_path.glob(f"{kineto.TEMP_PREFIX}*"))  # its own is gone too


def test_owner_pid_parsing() -> None:
    assert _tempdirs.owner_pid("perflab-load-123-x", "perflab-load-") == 123
    for name in ("perflab-load-x1-y", "perflab-load-123", "perflab-load-0-x", "perflab-load-１-x"):
        assert _tempdirs.owner_pid(name, "perflab-load-") is None


# -- progress ------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_line_only_on_a_terminal_and_only_for_long_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tty, clock = _Tty(), _Clock()
    monkeypatch.setattr(sys, "stderr", tty)
    with _progress.Progress("reading t.json", 1000, clock=clock) as shown:
        shown.update(100)
        clock.now = 1.0
        shown.update(300)
        assert tty.getvalue() == ""  # quick so far: nothing
        clock.now = 2.5
        shown.update(500)
        assert "reading t.json:  50%" in tty.getvalue()
    assert tty.getvalue().endswith("\r")  # the line is cleared at the end
    piped, clock = io.StringIO(), _Clock()
    monkeypatch.setattr(sys, "stderr", piped)
    with _progress.Progress("x", 10, clock=clock) as shown:
        clock.now = 5.0
        shown.update(5)
    assert piped.getvalue() == ""


def test_progress_bar_in_a_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    shown_bars: list[Any] = []

    class Bar:
        def __init__(self, **kw: Any) -> None:
            self.value = kw["value"]
            self.closed = False

        def close(self) -> None:
            self.closed = True

    fake = type(sys)("ipywidgets")
    fake.FloatProgress = Bar  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ipywidgets", fake)
    monkeypatch.setattr(_progress, "in_notebook", lambda: True)
    monkeypatch.setattr("IPython.display.display", shown_bars.append)
    clock = _Clock()
    with _progress.Progress("x", 10, clock=clock) as shown:
        clock.now = 3.0
        shown.update(4)
        assert shown_bars and shown_bars[0].value == 0.4
    assert shown_bars[0].closed
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # not installed: nothing at all
    stderr = _Tty()
    monkeypatch.setattr(sys, "stderr", stderr)
    with _progress.Progress("x", 10, clock=clock) as shown:
        clock.now = 9.0
        shown.update(4)
    assert stderr.getvalue() == ""


@pytest.mark.parametrize("json_output", [False, True])
def test_cli_progress_never_in_json_output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], json_output: bool
) -> None:
    monkeypatch.setattr(_progress, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(_progress, "UPDATE_EVERY_S", 0.0)
    monkeypatch.setattr(_kineto_fast, "PIECE_SIZE", 4096)  # many slices: many updates
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    trace = TRACES / "kineto" / "alexnet_a100.json.gz"
    args = ["trace", "summary", str(trace), "--workers", "0"]
    assert main(args + (["--json"] if json_output else [])) == 0
    out, err = capsys.readouterr()
    if json_output:
        assert err == ""
        json.loads(out)
    else:
        assert "reading alexnet_a100.json.gz:" in err and "%" in err


# -- compatibility ---------------------------------------------------------------------------


def _rocm_trace(tmp_path: Path, stream: Any = "0x0", device: Any = "0x0") -> Path:
    """The shape of a ROCm 6.2 Kineto trace (AMD MI250): ids as pointers in hex text."""
    events = [
        _kernel(args={"device": device, "stream": stream, "correlation": 1}),
        _kernel(ts=20.0, args={"device": device, "stream": stream, "correlation": 2}),
        _kernel(
            ts=30.0,
            cat="gpu_memcpy",
            name="Memcpy HtoD",
            args={"device": device, "stream": "0x1f", "bytes": 8},
        ),
    ]
    props = [
        {"id": 0, "name": "AMD Instinct MI250X / MI250", "gcnArchName": "gfx90a:sramecc+:xnack-"}
    ]
    return _write(tmp_path, {"traceEvents": events, "deviceProperties": props}, "rocm.json")


def test_rocm_trace_with_hex_stream_and_device(tmp_path: Path) -> None:
    trace = load_trace(_rocm_trace(tmp_path))
    labels = sorted(trace.track_label(t) for t in range(len(trace.tracks)))
    assert labels == ["AMD GPU 0 stream 0", "AMD GPU 0 stream 31"]
    summary = trace.summary()
    assert "AMD GPU 0: busy" in str(summary)
    assert summary.to_dict()["kernels"]["count"] == 2
    assert trace.meta["gpu"] == "AMD GPU"


@pytest.mark.parametrize("stream", ["(nil)", "12", "0X0"])
def test_other_documented_id_texts(tmp_path: Path, stream: str) -> None:
    assert len(load_trace(_rocm_trace(tmp_path, stream=stream))) == 3


@pytest.mark.parametrize("stream", ["zz", "0x", "1_0", "１２", "0x" + "f" * 17])
def test_other_id_texts_are_input_errors(tmp_path: Path, stream: str) -> None:
    path = _rocm_trace(tmp_path, stream=stream)
    with pytest.raises(InputError, match="stream") as info:
        load_trace(path)
    assert str(path) in str(info.value)


def test_nvidia_traces_keep_plain_gpu_labels() -> None:
    trace = load_trace(KINETO)
    assert "gpu" not in trace.meta
    assert all(
        trace.track_label(t).startswith(("GPU ", "process ")) for t in range(len(trace.tracks))
    )


def test_gzip_members_and_padding_still_read(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [_kernel(), _kernel(ts=20.0)]}).encode()
    path = tmp_path / "two.json.gz"
    path.write_bytes(gzip.compress(text[:40]) + gzip.compress(text[40:]) + b"\0" * 8)
    assert _common.read_bytes(path) == text


@pytest.mark.parametrize(
    ("key", "value"),
    [("events_read", {"a": 1}), ("events_read", -1), ("rank", "0"), ("devices", [1])],
)
def test_saved_meta_that_analyses_read_is_checked(
    saved: Path, tmp_path: Path, key: str, value: Any
) -> None:
    members = _members(saved)
    header = json.loads(members["header"].tobytes())
    header["meta"][key] = value
    with pytest.raises(SchemaError, match=rf"meta\.{key}"):
        Trace.load(_resave(tmp_path / "meta.npz", members, header))


def test_saved_trace_with_a_zip_version_zipfile_lacks(saved: Path) -> None:
    data = bytearray(saved.read_bytes())
    at = data.find(b"PK\x01\x02")  # the first central directory entry
    data[at + 6] = 235  # its "version needed to extract": 23.5
    saved.write_bytes(bytes(data))
    with pytest.raises(SchemaError, match=r"zip file version 23\.5"):
        Trace.load(saved)


def test_distributed_rank_that_is_not_a_count(tmp_path: Path) -> None:
    info: dict[str, Any] = {"rank": "zero", "world_size": 2}
    doc = {"traceEvents": [_kernel()], "distributedInfo": info}
    with pytest.raises(InputError, match=r"distributedInfo\.rank 'zero' is not a rank number"):
        load_trace(_write(tmp_path, doc))
    info["rank"] = "3"  # text digits are read as the number
    assert load_trace(_write(tmp_path, doc)).meta["rank"] == 3


@pytest.mark.parametrize(
    "args",
    [{"grid": [2**40, 1, 1]}, {"block": [1, -5, 1]}, {"registers per thread": 2**31}],
    ids=["grid", "block", "registers"],
)
def test_kernel_launch_values_beyond_32_bits(tmp_path: Path, args: Any) -> None:
    """They would wrap silently in the int32 kernel columns."""
    path = _write(tmp_path, {"traceEvents": [_kernel(), _kernel(args={"device": 0, **args})]})
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert str(path) in str(info.value)
    assert "traceEvents[1]" in str(info.value)


@pytest.mark.parametrize("finder", ["this process", "the helper"])
def test_malformed_text_in_a_parallel_load_is_not_streamed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finder: str
) -> None:
    """Broken text stops every reader: found by this process or in a helper's chunk, it goes
    straight to the whole-file check (one pass of the text, no decoded events held)."""
    text = gzip.decompress((TRACES / "kineto" / "sampled_4streams.json.gz").read_bytes())
    at = text.rfind(b'"ph"', 0, len(text) * 3 // 4)
    path = tmp_path / "broken.json"
    path.write_bytes(text[:at] + b'"ph";' + text[at + 5 :])
    if finder == "the helper":  # free at once: every chunk offered is the helper's
        monkeypatch.setattr(
            _parallel.PipedHelper, "start", lambda m, job, log: InProcessHelper(job)
        )
        monkeypatch.setattr(kineto, "CHUNK_MIN", 4096)
    else:  # no helper starts: this process reads it all
        monkeypatch.setattr(_parallel.PipedHelper, "start", lambda m, job, log: None)

    def no_second_pass(*args: Any) -> None:
        raise AssertionError("streamed a second time")

    monkeypatch.setattr(kineto, "_load_streaming", no_second_pass)
    with pytest.raises(InputError, match=r"malformed JSON: .*expected ':'") as info:
        load_trace(path, workers=1)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": [1, -Infinity]}', "-Infinity is not a JSON number"),
    ],
)
def test_saved_json_non_finite_tokens(text: bytes, message: str) -> None:
    with pytest.raises(SchemaError, match=message) as info:
        serialize.parse_json(text, "saved.json")
    assert "saved.json" in str(info.value)

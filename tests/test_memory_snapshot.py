"""CUDA memory snapshots: dicts in the shape torch.cuda.memory._snapshot() documents (and
torch.cuda._memory_viz reads), pickled with protocols 2 to 5 or given live, are summarised;
hostile pickles are refused before anything in them runs."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perflab.cli import main
from perflab.errors import InputError
from perflab.io.memory_snapshot import (
    is_snapshot_file,
    load_memory_snapshot,
    plain_loads,
    snapshot_from_object,
)
from perflab.render.views import to_bundle, to_text

MIB = 1 << 20
SEGMENT = 20 * MIB


def _frames(name: str, line: int) -> list[dict[str, Any]]:
    return [
        {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
        {"filename": "/work/train.py", "line": line, "name": name},
        {"filename": "/work/train.py", "line": 12, "name": "<module>"},
    ]


def snapshot() -> dict[str, Any]:
    """Two devices: on device 0 a segment on the default stream (two allocated blocks, one
    inactive) and one on a side stream (one block waiting to be freed, one inactive); on
    device 1 one segment; and device 0's allocator trace with an OOM."""
    base = 0x7F0000000000
    return {
        "segments": [
            {
                "device": 0,
                "address": base,
                "total_size": SEGMENT,
                "stream": 0,
                "segment_type": "large",
                "segment_pool_id": (0, 0),
                "allocated_size": 14 * MIB,
                "active_size": 14 * MIB,
                "blocks": [
                    {
                        "address": base,
                        "size": 8 * MIB,
                        "requested_size": 8 * MIB - 100,
                        "state": "active_allocated",
                        "frames": _frames("forward", 40),
                    },
                    {
                        "address": base + 8 * MIB,
                        "size": 6 * MIB,
                        "requested_size": 6 * MIB,
                        "state": "active_allocated",
                        "frames": _frames("backward", 50),
                    },
                    {
                        "address": base + 14 * MIB,
                        "size": 6 * MIB,
                        "state": "inactive",
                        "frames": [],
                    },
                ],
            },
            {
                "device": 0,
                "address": base + SEGMENT,
                "total_size": 2 * MIB,
                "stream": 0x55D0C0FFEE00,
                "segment_type": "small",
                "blocks": [
                    {"address": base + SEGMENT, "size": 512, "state": "active_awaiting_free"},
                    {"address": base + SEGMENT + 512, "size": 2 * MIB - 512, "state": "inactive"},
                ],
            },
            {
                "device": 1,
                "address": base * 2,
                "total_size": 4 * MIB,
                "stream": 0,
                "segment_type": "large",
                "blocks": [
                    {
                        "address": base * 2,
                        "size": 4 * MIB,
                        "requested_size": 3 * MIB,
                        "state": "active_allocated",
                        "frames": _frames("embed", 7),
                    }
                ],
            },
        ],
        "device_traces": [
            [
                {
                    "action": "segment_alloc",
                    "addr": base,
                    "size": SEGMENT,
                    "stream": 0,
                    "time_us": 10,
                },
                {"action": "alloc", "addr": base, "size": 8 * MIB, "stream": 0, "time_us": 11},
                {
                    "action": "alloc",
                    "addr": base + 8 * MIB,
                    "size": 6 * MIB,
                    "stream": 0,
                    "time_us": 12,
                },
                {"action": "free_requested", "addr": base + 8 * MIB, "size": 6 * MIB, "stream": 0},
                {"action": "free_completed", "addr": base + 8 * MIB, "size": 6 * MIB, "stream": 0},
                {
                    "action": "alloc",
                    "addr": base + 8 * MIB,
                    "size": 6 * MIB,
                    "stream": 0,
                    "time_us": 30,
                },
                {
                    "action": "oom",
                    "size": 64 * MIB,
                    "device_free": 3 * MIB,
                    "stream": 0,
                    "time_us": 40,
                },
            ],
            [],
        ],
    }


def _check_summary(summary: Any) -> None:
    d0, d1 = summary.devices
    assert (d0.device, d0.segments, d0.reserved) == (0, 2, SEGMENT + 2 * MIB)
    assert d0.allocated == 14 * MIB and d0.cached_free == 8 * MIB - 512
    states = {s.name: (s.bytes, s.count) for s in d0.by_state}
    assert states == {
        "active_allocated": (14 * MIB, 2),
        "active_awaiting_free": (512, 1),
        "inactive": (8 * MIB - 512, 2),
    }
    assert [(s.stream, s.segments, s.reserved) for s in d0.by_stream] == [
        (0, 1, SEGMENT),
        (0x55D0C0FFEE00, 1, 2 * MIB),
    ]
    assert d0.unaccounted == 0
    assert (d1.device, d1.reserved, d1.allocated) == (1, 4 * MIB, 4 * MIB)
    sizes = [(a.size, a.device, a.requested) for a in summary.largest]
    assert sizes == [(8 * MIB, 0, 8 * MIB - 100), (6 * MIB, 0, 6 * MIB), (4 * MIB, 1, 3 * MIB)]
    assert summary.largest[0].stack[1] == ("/work/train.py", 40, "forward")
    (trace,) = summary.traces
    assert trace.entries == 7 and trace.actions["alloc"] == 3
    assert trace.peak_live == 14 * MIB  # 8 + 6, then 6 freed and 6 allocated again
    assert trace.ooms == ((64 * MIB, 3 * MIB),)
    assert trace.span_us == 30


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_a_pickled_snapshot_is_summarised(protocol: int, tmp_path: Path) -> None:
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps(snapshot(), protocol=protocol))
    assert is_snapshot_file(path)
    _check_summary(load_memory_snapshot(path).summary())


def test_the_live_object_is_summarised_too() -> None:
    _check_summary(snapshot_from_object(snapshot()).summary())


def test_an_old_snapshot_of_segments_only_is_read() -> None:
    summary = snapshot_from_object(snapshot()["segments"]).summary()
    assert len(summary.devices) == 2 and summary.traces == ()


def test_views_and_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = snapshot()
    data["segments"][0]["blocks"][0]["frames"][1]["name"] = "<img src=x onerror=alert(1)>"
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(data))
    summary = load_memory_snapshot(path).summary(top=2)
    text = to_text(summary)
    assert "device 0: 2 segments, 22 MiB reserved" in text
    assert "out of memory: asked for 64 MiB with 3 MiB free" in text
    assert "(/work/train.py:50)" in text  # Python frames are shown
    html = to_bundle(summary)["text/html"]
    assert isinstance(html, str) and "<img src=x" not in html
    assert main(["trace", "memory", str(path), "--json", "--top", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["reserved_bytes"] for d in doc["devices"]] == [SEGMENT + 2 * MIB, 4 * MIB]
    assert len(doc["largest"]) == 1 and doc["largest"][0]["bytes"] == 8 * MIB
    assert doc["traces"][0]["ooms"] == [{"bytes": 64 * MIB, "device_free": 3 * MIB}]
    assert main(["trace", "memory", str(path)]) == 0
    assert "memory snapshot" in capsys.readouterr().out


# -- values that are not a snapshot's ------------------------------------------------------


def _broken(change: Any) -> dict[str, Any]:
    data = snapshot()
    change(data)
    return data


WRONG = {
    "a size as text": (lambda d: d["segments"][0].update(total_size="big"), "segments[0]"),
    "a negative size": (
        lambda d: d["segments"][0]["blocks"][1].update(size=-1),
        "segments[0].blocks[1]",
    ),
    "a size past 2**53": (lambda d: d["segments"][1].update(total_size=2**60), "segments[1]"),
    "a boolean address": (lambda d: d["segments"][2].update(address=True), "segments[2]"),
    "an address past 2**64": (lambda d: d["segments"][2].update(address=2**64), "segments[2]"),
    "an unknown state": (
        lambda d: d["segments"][0]["blocks"][0].update(state="lost"),
        "segments[0].blocks[0]",
    ),
    "frames that are not a list": (
        lambda d: d["segments"][0]["blocks"][0].update(frames="x"),
        "segments[0].blocks[0]",
    ),
    "a frame's name that is not text": (
        lambda d: d["segments"][0]["blocks"][0]["frames"][1].update(name=3),
        "segments[0].blocks[0].frames[1]",
    ),
    "blocks that are not a list": (
        lambda d: d["segments"][0].update(blocks={}),
        "segments[0].blocks",
    ),
    "a trace entry that is not a dict": (
        lambda d: d["device_traces"][0].append(5),
        "device_traces[0][7]",
    ),
    "no total size": (lambda d: d["segments"][0].pop("total_size"), "segments[0]"),
}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_a_value_of_the_wrong_type_or_range_names_its_place(case: str, tmp_path: Path) -> None:
    change, place = WRONG[case]
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(_broken(change), protocol=4))
    with pytest.raises(InputError) as refused:
        load_memory_snapshot(path)
    assert str(path) in str(refused.value) and f"({place})" in str(refused.value)


def test_something_else_at_the_top_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(42, protocol=4))
    with pytest.raises(InputError, match="not a memory snapshot"):
        load_memory_snapshot(path)
    path.write_bytes(b'{"segments": []}')
    with pytest.raises(InputError, match="not a pickle of protocol 2 to 5"):
        load_memory_snapshot(path)


# -- hostile pickles -----------------------------------------------------------------------


class _System:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _hostile(marker: Path) -> dict[str, bytes]:
    """Pickles that would run code, made by pickle itself and by hand."""
    command = f"touch {marker}".encode()
    return {
        "reduce p2": pickle.dumps({"segments": [_System(marker)]}, protocol=2),
        "reduce p4": pickle.dumps({"segments": [_System(marker)]}, protocol=4),
        "reduce p5": pickle.dumps(_System(marker), protocol=5),
        "GLOBAL then REDUCE": b"\x80\x02cposix\nsystem\n("
        + b"U"
        + bytes([len(command)])
        + command
        + b"tR.",
        "INST": b"\x80\x02(" + b"U" + bytes([len(command)]) + command + b"iposix\nsystem\n.",
        "STACK_GLOBAL": b"\x80\x04\x8c\x05posix\x8c\x06system\x93("
        + b"\x8c"
        + bytes([len(command)])
        + command
        + b"tR.",
        "a class by BUILD": pickle.dumps(io.BytesIO(b"x"), protocol=4),
        "a persistent id": b"\x80\x04\x8c\x01xQ.",
    }


@pytest.mark.parametrize("case", sorted(_hostile(Path("m"))))
def test_a_pickle_that_would_run_code_is_refused_without_running(case: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    data = _hostile(marker)[case]
    path = tmp_path / "evil.pickle"
    path.write_bytes(data)
    with pytest.raises(InputError, match="refers to Python code") as refused:
        load_memory_snapshot(path)
    assert str(path) in str(refused.value)
    assert not marker.exists()
    with pytest.raises(InputError, match="refers to Python code"):
        plain_loads(data, "x")  # the check before the unpickler refuses it
    assert not marker.exists()


def test_the_unpickler_refuses_classes_even_without_the_check(tmp_path: Path) -> None:
    """The second line of defence: the unpickler builds no class or function."""
    from perflab.io import memory_snapshot

    marker = tmp_path / "ran"
    with pytest.raises(memory_snapshot._Refused):
        memory_snapshot._PlainUnpickler(io.BytesIO(_hostile(marker)["reduce p4"])).load()
    assert not marker.exists()


PROTO4 = b"\x80\x04"
HUGE = {
    "BINBYTES8 of 2**62": (PROTO4 + b"\x8e" + struct.pack("<Q", 2**62) + b"abc.", "past the end"),
    "BINUNICODE8 of 8 GiB": (PROTO4 + b"\x8d" + struct.pack("<Q", 8 << 30) + b"a.", "past the end"),
    "BYTEARRAY8 of 8 GiB": (PROTO4 + b"\x96" + struct.pack("<Q", 8 << 30) + b"a.", "past the end"),
    "BINUNICODE of 4 GiB": (PROTO4 + b"X" + struct.pack("<I", 2**32 - 1) + b"a.", "past the end"),
    "FRAME of 2**40": (PROTO4 + b"\x95" + struct.pack("<Q", 2**40) + b"N.", "past the end"),
    "LONG4 of 2 GiB": (PROTO4 + b"\x8b" + struct.pack("<i", 2**31 - 1) + b"a.", "past the end"),
    # a memo index of 2**31 makes CPython's unpickler clear a 32 GiB memo table
    "LONG_BINPUT of 2**31": (PROTO4 + b"Nr" + struct.pack("<I", 2**31) + b".", "memo index"),
    "PUT of 10**12": (b"\x80\x02Np1000000000000\n.", "memo index"),
    "no STOP": (PROTO4 + b"}", "without STOP"),
    "a truncated pickle": (pickle.dumps(snapshot(), protocol=4)[:-40], "not a"),
    "not an opcode": (PROTO4 + b"\xff.", "not a pickle opcode"),
}


@pytest.mark.parametrize("case", sorted(HUGE))
def test_huge_lengths_and_memo_indices_are_refused_at_once(case: str, tmp_path: Path) -> None:
    """Each is refused before an allocation that size is made: checked in a child process
    whose address space is capped at 2 GiB, so a reader that tried would fail there."""
    path = tmp_path / "huge.pickle"
    data, said = HUGE[case]
    path.write_bytes(data)
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
        "from perflab.io.memory_snapshot import load_memory_snapshot\n"
        "from perflab.errors import InputError\n"
        "try:\n"
        f"    load_memory_snapshot({str(path)!r})\n"
        "except InputError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert str(path) in done.stdout and said in done.stdout, done.stdout


def test_one_list_shared_many_times_over_is_bounded(tmp_path: Path) -> None:
    """Lists that hold the one before them many times over are small in a pickle (the memo
    shares them) and astronomically large to walk: the walk stops at its budget."""
    block = {"address": 0, "size": 1, "state": "inactive"}
    segment = {"address": 0, "total_size": 1, "stream": 0, "blocks": [block] * 1000}
    segments = [segment] * 100_000  # one dict 100k times: 1e8 blocks to walk
    path = tmp_path / "shared.pickle"
    path.write_bytes(pickle.dumps({"segments": segments}, protocol=4))
    assert path.stat().st_size < 1 << 20
    with pytest.raises(InputError, match="more values than a snapshot of this size holds"):
        load_memory_snapshot(path)


def test_frames_are_kept_short_and_may_lack_a_line() -> None:
    data = snapshot()
    frames = data["segments"][0]["blocks"][0]["frames"]
    frames[1]["name"] = "f" * 10_000
    del frames[2]["line"]
    frames += [{"filename": "deep.py", "line": i, "name": "g"} for i in range(1000)]
    stack = snapshot_from_object(data).summary().largest[0].stack
    assert len(stack) == 256 and len(stack[1][2]) == 512
    assert stack[2] == ("/work/train.py", -1, "<module>")

"""Copies by direction and host memory, in the summary and its advice, from Kineto's names
and from Nsight Systems' srcKind/dstKind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_paths import TRACES
from kineto_gen import injected_trace
from nsys_hostile import hostile_copy, rebuilt

from perflab.analysis.copies import copies_by_kind, copy_advice, host_memory, memory_sides
from perflab.analysis.idle_classify import CAUSES
from perflab.cli import main
from perflab.io import load_trace
from perflab.io.kineto import loads_kineto

NCCL = TRACES / "kineto" / "nccl_2ranks_a100.json.gz"
SAMPLED = TRACES / "kineto" / "sampled_4streams.json.gz"
T4 = TRACES / "nsys" / "power_iteration.sqlite"


@pytest.mark.parametrize(
    ("name", "direction", "sides", "host"),
    [
        ("Memcpy HtoD (Pageable -> Device)", "HtoD", ("pageable", "device"), "pageable"),
        ("Memcpy DtoH (Device -> Pinned)", "DtoH", ("device", "pinned"), "pinned"),
        ("Memcpy DtoD (Device -> Device)", "DtoD", ("device", "device"), ""),
        ("Memcpy PtoP (Device -> Device)", "PtoP", ("device", "device"), ""),
        ("Memcpy DtoH", "DtoH", ("unknown", "unknown"), "unknown"),
        ("Memcpy HtoD (Mystery -> Device)", "HtoD", ("unknown", "device"), "unknown"),
    ],
)
def test_memory_sides_from_names(
    name: str, direction: str, sides: tuple[str, str], host: str
) -> None:
    assert memory_sides(name) == sides
    assert host_memory(name, direction) == host


def test_generated_copies_are_counted_per_direction() -> None:
    injected = injected_trace(4)
    by_kind = copies_by_kind(loads_kineto(injected.data()))
    readbacks = injected.segments.count("readback")
    assert by_kind["DtoD"].count == injected.dtod and by_kind["DtoD"].pageable == 0
    assert by_kind["DtoD"].bytes == injected.dtod << 20
    assert by_kind["DtoH"].count == readbacks == by_kind["DtoH"].pageable
    assert set(by_kind) == {"DtoD", "DtoH"}


def test_a100_copies_are_device_to_device_and_advice_says_so() -> None:
    summary = load_trace(NCCL).summary()
    by_kind = summary.memcpy.by_kind
    assert list(by_kind) == ["DtoD"] and by_kind["DtoD"].count == 960 == summary.memcpy.count
    text = str(summary)
    assert "memcpy: 960 copies" in text and "(DtoD 960," in text
    assert "960 DtoD copies are device work" in text
    assert "pin_memory" not in text  # no host memory, so no pinning advice


def test_t4_readbacks_are_pageable_dtoh_from_nsys_kinds() -> None:
    trace = load_trace(T4)
    names = set(trace.names_of(trace.memcpy["event"]))
    assert names == {"Memcpy DtoH (Device -> Pageable)"}
    kind = trace.summary().memcpy.by_kind["DtoH"]
    assert (kind.count, kind.pageable, kind.pinned) == (89, 89, 0)
    (advice,) = copy_advice({"DtoH": kind})
    assert advice.startswith("89 of 89 DtoH copies used pageable host memory: pinned memory")


def test_nsys_export_without_memory_kinds_still_reads(tmp_path: Path) -> None:
    table = "CUPTI_ACTIVITY_KIND_MEMCPY"
    path = hostile_copy(tmp_path, *rebuilt(table, "srcKind", None, None))
    trace = load_trace(path)
    assert set(trace.names_of(trace.memcpy["event"])) == {"Memcpy DtoH"}
    kind = trace.summary().memcpy.by_kind["DtoH"]
    assert (kind.count, kind.pageable, kind.pinned) == (89, 0, 0)
    assert copy_advice({"DtoH": kind}) == []  # no evidence of pageable memory, no advice


def test_nsys_memory_kinds_of_the_wrong_type_read_unknown(tmp_path: Path) -> None:
    path = hostile_copy(
        tmp_path,
        "UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET srcKind = 'x', dstKind = 99",
    )
    trace = load_trace(path)
    assert set(trace.names_of(trace.memcpy["event"])) == {"Memcpy DtoH (Unknown -> Unknown)"}


def test_mixed_host_memory_gets_advice_only_where_pageable() -> None:
    by_kind = load_trace(SAMPLED).summary().memcpy.by_kind
    assert (by_kind["HtoD"].count, by_kind["HtoD"].pageable, by_kind["HtoD"].pinned) == (24, 16, 8)
    advice = copy_advice(by_kind)
    assert advice[0].startswith("16 of 24 HtoD copies used pageable host memory")
    assert advice[1].startswith("8 of 8 DtoH copies used pageable host memory")
    assert advice[2].startswith("8 DtoD copies are device work")


def test_summary_json_has_copies_by_kind_and_idle_by_cause(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["trace", "summary", str(T4), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["memcpy"]["by_kind"] == {
        "DtoH": {
            "count": 89,
            "total_us": pytest.approx(322.04),
            "bytes": 2883944,
            "pageable": 89,
            "pinned": 0,
        }
    }
    idle = doc["idle"]
    assert list(idle) == list(CAUSES)  # every cause, in their order
    assert idle["after-sync"]["gaps"] == 88 and idle["after-sync"]["share"] > 0.99
    total = sum(v["idle_us"] for v in idle.values())
    assert total == pytest.approx(doc["devices"]["0"]["idle_us"], rel=1e-9)

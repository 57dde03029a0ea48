"""Measured ceilings: the cache file, load_ceilings, and `perflab ceilings` on this CPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perflab.capture.env import current_device_name
from perflab.cli import main
from perflab.errors import SchemaError
from perflab.machine import ceilings
from perflab.machine.ceilings import bandwidth_by_level, flops_by_dtype
from perflab.model.ceilings import (
    Ceilings,
    all_ceilings,
    cache_path,
    load_ceilings,
    save_ceilings,
)
from perflab.model.machine import BenchResult, Level, Series


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFLAB_CACHE_DIR", str(tmp_path))
    return tmp_path / "ceilings.json"


def test_cache_path_follows_the_environment(cache, monkeypatch):
    assert cache_path() == cache
    monkeypatch.delenv("PERFLAB_CACHE_DIR")
    assert cache_path().parts[-3:] == (".cache", "perflab", "ceilings.json")


def test_one_cache_directory_for_compiled_kernels_and_ceilings(cache, monkeypatch):
    from perflab.capture.compile import cache_root

    assert cache_root().parent == cache_path().parent == cache.parent
    monkeypatch.setenv("PERFLAB_CACHE_DIR", "")  # empty: the default, for both
    assert cache_root().parent == cache_path().parent == Path.home() / ".cache" / "perflab"


def test_round_trip_and_several_devices(cache):
    assert load_ceilings("NVIDIA H200") is None  # no file yet
    h200 = Ceilings("NVIDIA H200", "cuda", {"bf16": 7.5e5}, {"HBM": 4100.0, "L2": 9000.0})
    cpu = Ceilings("CPU: X", "cpu", {"fp32": 200.0}, {"DRAM": 40.0})
    save_ceilings(h200)
    save_ceilings(cpu)
    assert set(all_ceilings()) == {"NVIDIA H200", "CPU: X"}
    got = load_ceilings("NVIDIA H200")
    assert got is not None
    assert got.to_dict() == h200.to_dict()
    assert load_ceilings("NVIDIA A100") is None
    # re-measuring replaces only that device's entry
    save_ceilings(Ceilings("CPU: X", "cpu", {"fp32": 210.0}, {"DRAM": 41.0}))
    assert load_ceilings("CPU: X").flops == {"fp32": 210.0}
    assert load_ceilings("NVIDIA H200").bandwidth == {"HBM": 4100.0, "L2": 9000.0}
    doc = json.loads(cache.read_text())
    assert doc["perflab"] == "Ceilings" and doc["schema_version"] == 1


@pytest.mark.parametrize(
    "devices",
    [
        "nope",
        {"d": {"backend": "cpu"}},
        {"d": {"device": "d", "backend": "cpu", "flops": {"fp32": -1}}},
        {"d": {"device": "d", "backend": "cpu", "flops": {"fp32": "fast"}}},
        {"d": {"device": "d", "backend": "cpu", "bandwidth": [1, 2]}},
        {"d": {"device": "d", "backend": "cpu", "bandwidth": {"DRAM": True}}},
        {"d": {"device": "d", "backend": "cpu", "versions": []}},
        {"d": {"device": "d", "backend": 7}},
        {"d": {"device": "d", "backend": "cpu", "notes": [1]}},
    ],
)
def test_damaged_cache_is_a_schema_error_naming_the_file(cache, devices):
    cache.write_text(json.dumps({"perflab": "Ceilings", "schema_version": 1, "devices": devices}))
    with pytest.raises(SchemaError) as info:
        load_ceilings("d")
    assert str(cache) in str(info.value)


def test_not_json_cache_is_a_schema_error(cache):
    cache.write_text("{")
    with pytest.raises(SchemaError, match="not valid JSON"):
        load_ceilings("d")


def test_views_escape_and_show_units():
    c = Ceilings("<gpu>", "cuda", {"bf16": 1000.0}, {"HBM": 4000.0}, notes=["<i>n</i>"])
    bundle = c._repr_mimebundle_()
    assert "1 TFLOP/s" in bundle["text/plain"] and "4 TB/s" in bundle["text/plain"]
    assert "<gpu>" not in bundle["text/html"] and "&lt;gpu&gt;" in bundle["text/html"]
    assert "<i>" not in bundle["text/html"]


def test_ceilings_from_results_fold_dtypes_and_put_memory_first(monkeypatch):
    # device memory is what lies past twice the last cache; with the machine's own caches
    # (a 480 MiB L3 on some) the 1 GB point would not be past it, so the test names its own
    monkeypatch.setattr(ceilings, "cache_capacities", lambda on_gpu: {"L2": 5e5, "L3": 4e6})
    mm = BenchResult(
        "matmul",
        "d",
        "cpu",
        series=[
            Series("torch-fp32", np.array([64, 128]), np.array([50.0, 80.0]), "n", "GFLOPs"),
            Series("numpy-fp32", np.array([64, 128]), np.array([90.0, 70.0]), "n", "GFLOPs"),
            Series("numpy-fp64", np.array([64]), np.array([30.0]), "n", "GFLOPs"),
        ],
    )
    assert flops_by_dtype(mm) == {"fp32": 90.0, "fp64": 30.0}
    copy = Series(
        "copy",
        np.array([64e3, 1e6, 1e9]),
        np.array([150.0, 100.0, 30.0]),
        "bytes",
        "GBps",
        levels=[Level("L2", 64e3, 5e5, 150.0, 3), Level("L3", 1e6, 4e6, 100.0, 3)],
    )
    bw = bandwidth_by_level(BenchResult("bandwidth", "d", "cpu", series=[copy]), False)
    assert next(iter(bw)) == "DRAM"  # the roofline's default roof is device memory
    assert bw == {"DRAM": 30.0, "L3": 100.0, "L2": 150.0}


@pytest.mark.slow
def test_cli_measures_this_cpu_stores_and_shows(cache, capsys):
    assert main(["ceilings", "--quick", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"device", "backend", "flops", "bandwidth"}
    assert doc["device"] == current_device_name() and doc["backend"] == "cpu"
    assert {"fp32", "fp64"} <= set(doc["flops"])
    assert all(v > 0 for v in (*doc["flops"].values(), *doc["bandwidth"].values()))
    assert "DRAM" in doc["bandwidth"]
    stored = load_ceilings(current_device_name())
    assert stored is not None and stored.summary() == doc
    assert main(["ceilings", "--show"]) == 0
    assert "measured ceilings of" in capsys.readouterr().out


def test_cli_show_without_measurement_is_a_clean_error(cache, capsys):
    assert main(["ceilings", "--show"]) == 2
    assert "no ceilings stored" in capsys.readouterr().err

"""profile(fn, memory=True) records the allocator's events, which trace.memory() reads; without
it the trace has none and says so."""

from __future__ import annotations

import pytest

from perflab.capture.profile import profile


def test_memory_true_records_what_the_call_allocated() -> None:
    torch = pytest.importorskip("torch")
    kept: list[object] = []

    def step() -> None:
        kept.append(torch.ones(256, 1024))  # 1 MiB, alive after the call

    report = profile(step, cuda=False, memory=True).memory()
    (device,) = report.devices
    assert device.peak_allocated >= 256 * 1024 * 4
    assert not profile(lambda: torch.ones(8), cuda=False).memory().devices

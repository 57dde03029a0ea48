from __future__ import annotations

import pytest

import perflab
from perflab.capture.nvtx import Range, clear_spans, host_spans, open_ranges


def test_range_context_manager_records_nested_spans() -> None:
    clear_spans()
    with perflab.range("outer"), perflab.range("inner"):
        assert open_ranges() == 2
    spans = host_spans()
    assert [(s.name, s.depth) for s in spans] == [("inner", 1), ("outer", 0)]
    assert spans[1].start_ns <= spans[0].start_ns <= spans[0].end_ns <= spans[1].end_ns


def test_range_decorator_closes_on_exception() -> None:
    clear_spans()

    @Range("failing")
    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        fail()
    assert open_ranges() == 0
    assert [s.name for s in host_spans()] == ["failing"]


def test_range_appears_in_torch_profiler() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof, perflab.range("my-step"):
        torch.ones(8) + 1
    names = {e.key for e in prof.key_averages()}
    assert "my-step" in names


def test_range_emits_nvtx_through_nvtx_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import nvtx

    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(nvtx, "push_range", lambda message, domain: calls.append(("push", message)))
    monkeypatch.setattr(nvtx, "pop_range", lambda domain: calls.append(("pop", domain)))
    with perflab.range("nvtx-check"):
        pass
    assert calls == [("push", "nvtx-check"), ("pop", "perflab")]

"""Every JSON document perflab writes, by where it goes: each command's ``--json`` output
(:data:`COMMAND_OUTPUTS`) and each saved file kind (:data:`SAVED_FILES`), mapped to the
declared type whose encoding it is. The reference page (``docs/reference/json.md``, made
by ``docs/_ext/perflab_json.py``) shows each type's JSON Schema; the docs build fails on a
command with ``--json`` that is missing here, and a test converts each command's real
output to its type."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypedDict

import msgspec
from msgspec import UNSET, UnsetType

from perflab.analysis import json_views as views
from perflab.capture.env import Device
from perflab.capture.toolchain import FoundTool
from perflab.exercises.views import ExerciseView
from perflab.model import json_outputs as printed
from perflab.model import saved
from perflab.model.machine import Topology


class ValidationView(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``gpu_validation`` of ``perflab info``: the record and the GPU-path files changed
    since, or ``error`` alone when the record cannot be read."""

    device: str | UnsetType = UNSET
    commit: str | UnsetType | None = UNSET
    dirty: bool | UnsetType | None = UNSET
    date: str | UnsetType = UNSET
    files: dict[str, str] | UnsetType = UNSET
    changed_since: list[str] | UnsetType = UNSET
    error: str | UnsetType = UNSET


class InfoView(TypedDict):
    """``perflab info --json``: backend, devices, versions, CUDA tools (null: not found),
    platform, and the GPU validation record (null when the package has none)."""

    backend: str
    devices: list[Device]
    versions: dict[str, str | None]
    cuda_tools: dict[str, FoundTool | None]
    platform: dict[str, str]
    gpu_validation: ValidationView | None


@dataclass(frozen=True)
class Output:
    """A document and when it is the one written (``""``: always)."""

    kind: Any  # a Struct, dataclass, TypedDict or list of one
    when: str = ""


COMMAND_OUTPUTS: dict[str, tuple[Output, ...]] = {
    "info": (Output(InfoView),),
    "time": (Output(saved.TimingDoc),),
    "trace summary": (
        Output(views.SummaryView, "one trace file"),
        Output(views.JobDoc, "a job: a directory or several rank files"),
    ),
    "trace kernels": (
        Output(views.JobKernelsView, "a job: a directory or several rank files"),
        Output(saved.OpTableDoc, "one trace file"),
    ),
    "trace idle": (Output(views.IdleView),),
    "trace critical": (Output(views.CriticalDoc),),
    "trace memory": (
        Output(views.MemoryView, "a trace"),
        Output(views.SnapshotView, "a memory snapshot (.pickle)"),
    ),
    "trace diff": (Output(views.DiffView),),
    "trace sql": (Output(views.SqlView),),
    "compile": (
        Output(views.CompileJson, "one compiled file"),
        Output(list[views.CompileJson], "several files (Triton: one per kernel)"),
    ),
    **{
        f"machine {name}": (Output(printed.BenchView),)
        for name in ("latency", "bandwidth", "launch", "matmul", "h2d")
    },
    "machine collectives": (Output(list[printed.CollectiveRowView]),),
    "machine topology": (Output(Topology),),
    "ceilings": (Output(printed.CeilingsView),),
    "exercises list": (Output(list[ExerciseView]),),
}


class SavedFile(TypedDict):
    """The header every saved JSON file starts with, before the fields of its kind."""

    perflab: str
    schema_version: int


SAVED_FILES: dict[str, Any] = {
    "TimingResult": saved.TimingFile,
    "BenchResult": saved.BenchDoc,
    "CollectiveResult": saved.CollectiveResultDoc,
    "Ceilings": saved.CeilingsFile,
    "CompileResult": saved.CompileDoc,
    "CompileCacheEntry": saved.CacheEntryDoc,
    "TimingHistory": saved.HistoryDoc,
}


def json_commands(parser: argparse.ArgumentParser, path: str = "") -> Iterator[str]:
    """The name of every command under ``parser`` that takes ``--json`` (``"trace idle"``),
    each once (an alias under its first name)."""
    if any("--json" in action.option_strings for action in parser._actions):
        yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from json_commands(sub, f"{path} {name}".strip())


def schema(kind: Any) -> dict[str, Any]:
    """The JSON Schema of a declared type."""
    return msgspec.json.schema(kind)

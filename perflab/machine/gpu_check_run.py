"""How ``scripts/gpu-check`` and ``scripts/gpu-record`` run their sections and report them:
a section is a function of the backend; each runs whatever the ones before it did, its
outcome (ok, failed, error, skipped, missing) goes in the report, the report is written
after every section, and one summary table ends the run."""

from __future__ import annotations

import math
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict


@dataclass(frozen=True)
class Section:
    """One step of the check: its name, its estimated seconds on an H200 and on this
    machine's CPU (dry run), and the function (backend -> JSON-able result)."""

    name: str
    gpu_estimate_s: float
    cpu_estimate_s: float
    run: Callable[[str], object]


class CheckFailed(Exception):
    """A section ran but something it checks did not hold (reported as ``failed``)."""

    status = "failed"

    def __init__(self, message: str, result: object) -> None:
        super().__init__(message)
        self.result = result


class MissingPackages(CheckFailed):
    """Packages the later sections import are not here (``missing``: the check stops)."""

    status = "missing"


class CheckDoc(TypedDict):
    passed: bool
    detail: str


def check(passed: bool, detail: str) -> CheckDoc:
    """One named check's outcome, as the report keeps it."""
    return {"passed": bool(passed), "detail": detail}


def failed_checks(checks: dict[str, CheckDoc]) -> list[str]:
    return [name for name, doc in checks.items() if not doc["passed"]]


def positive(value: object) -> bool:
    """A finite number above 0 (a time, a rate)."""
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


class _Estimate(TypedDict):
    estimate_s: float


class SectionEntry(_Estimate, total=False):
    """One section's line in the report: its estimate, then what happened."""

    status: str
    seconds: float
    result: object
    error: str
    traceback: str


class _Sections(TypedDict):
    sections: dict[str, SectionEntry]


class Report(_Sections, total=False):
    """What scripts/gpu-check and scripts/gpu-record write (they add keys of their own)."""

    exit_code: int


def run_section(section: Section, backend: str) -> SectionEntry:
    """``{"status": ok|failed|error|skipped, "seconds", "estimate_s", "result"|"error"}``;
    a section's exception never stops the check."""
    t0 = time.monotonic()
    entry: SectionEntry = {
        "estimate_s": section.gpu_estimate_s if backend == "cuda" else section.cpu_estimate_s
    }
    try:
        result = section.run(backend)
        skipped = isinstance(result, dict) and set(result) == {"skipped"}
        entry["status"], entry["result"] = ("skipped" if skipped else "ok"), result
    except CheckFailed as exc:
        entry["status"], entry["error"], entry["result"] = exc.status, str(exc), exc.result
    except Exception as exc:  # one broken section must not hide the others
        entry["status"], entry["error"] = "error", f"{type(exc).__name__}: {exc}"
        entry["traceback"] = traceback.format_exc(limit=6)
    entry["seconds"] = round(time.monotonic() - t0, 1)
    return entry


def run_all(steps: list[Section], backend: str, report: Report, path: Path, tag: str) -> int:
    """Run ``steps`` in order into ``report["sections"]``, saying each on stderr and writing
    ``report`` to ``path`` after every one (a run cut short keeps what finished); stop at
    once at a missing package. Sets and returns ``report["exit_code"]``. Serves
    scripts/gpu-check and scripts/gpu-record."""
    import json

    from perflab.model.serialize import write_text

    def save() -> None:
        write_text(path, json.dumps(report, indent=1, default=str))

    for section in steps:
        print(f"[{tag}] {section.name} ...", file=sys.stderr, flush=True)
        report["sections"][section.name] = entry = run_section(section, backend)
        error = f": {entry['error']}" if entry.get("error") else ""
        print(
            f"[{tag}] {section.name}: {entry['status']} in {entry['seconds']} s "
            f"(estimate {entry['estimate_s']} s){error}",
            file=sys.stderr,
            flush=True,
        )
        save()
        if entry["status"] == "missing":  # nothing after it could run: stop at once
            missing = entry.get("result")
            if isinstance(missing, dict):
                print(missing["instructions"], file=sys.stderr, flush=True)
            break
    report["exit_code"] = exit_code(report)
    save()
    return int(report["exit_code"])


def summary_table(report: Report) -> str:
    """One table of every section (status, seconds against the estimate, and the error
    or a short note), then the total."""
    head = f"{'section':16} {'status':8} {'seconds':>8} {'est.':>6}  note"
    lines = [head, "-" * len(head)]
    total = 0.0
    for name, entry in report["sections"].items():
        total += entry["seconds"]
        note = entry.get("error") or _note(name, entry.get("result"))
        lines.append(
            f"{name:16} {entry['status']:8} {entry['seconds']:8.1f} {entry['estimate_s']:6.0f}  "
            f"{note}"[:160]
        )
    lines.append(f"{'total':16} {'':8} {total:8.1f}")
    return "\n".join(lines)


def _note(name: str, result: object) -> str:
    if not isinstance(result, dict):
        return ""
    if "skipped" in result:
        return str(result["skipped"])
    if name == "gpu tests":
        return str(result.get("summary", ""))
    if name == "timing engine":
        runs = result.get("runs", {})
        return ", ".join(f"{k} {v['median_us']:.3g} us" for k, v in runs.items())[:120]
    if name == "modules":
        return _modules_note(result)
    if name == "environment":
        devices = result.get("machine", {}).get("devices", [{}])
        return str(devices[0].get("name", ""))
    if not any(k in result for k in ("series", "rows", "flops")):  # a recording's numbers
        return ", ".join(f"{k} {v:.4g}" for k, v in result.items() if positive(v))[:120]
    warnings = result.get("warnings") or []
    return f"{len(result.get('series') or result.get('rows') or [])} series/rows" + (
        f"; {warnings[0]}" if warnings else ""
    )


def _modules_note(result: dict[str, object]) -> str:
    present = result.get("present", {})
    note = f"{len(present) if isinstance(present, dict) else 0} present"
    if result.get("installed_from_wheels"):
        note += f", installed from .whl/: {_names(result['installed_from_wheels'])}"
    if result.get("optional_absent"):
        note += f"; optional, absent: {_names(result['optional_absent'])}"
    return note


def _names(value: object) -> str:
    """A list's items, or a dict's keys, comma-separated."""
    return ", ".join(str(v) for v in value) if isinstance(value, (list, dict)) else str(value)


def exit_code(report: Report) -> int:
    """0 when every section is ok or skipped; 1 when any failed or errored; 2 when
    packages are missing (the check stopped before measuring anything)."""
    statuses = {e["status"] for e in report["sections"].values()}
    if "missing" in statuses:
        return 2
    return 1 if statuses & {"failed", "error"} else 0

"""Text and HTML of a job summary (:class:`perflab.analysis.job.JobSummary`). Every string
from the traces (file names, warnings) is escaped in HTML."""

from __future__ import annotations

from typing import Any

from perflab.analysis.job import JobSummary
from perflab.model.units import format_ns
from perflab.render.html import esc, table, text_table, wrap

RANK_HEADERS = ["rank", "busy", "idle", "span", "busy %", "kernels", "comm", "comm time", "overlap"]
STRAGGLER_HEADERS = ["rank", "last", "mean lateness", "others' wait"]


def _time(us: float | None) -> str:
    return "n/a" if us is None else format_ns(us * 1e3)


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def rank_rows(doc: dict[str, Any]) -> list[list[str]]:
    rows = []
    for rank, v in doc["ranks"].items():
        c = v["comm"]
        rows.append(
            [
                rank,
                _time(v["busy_us"]),
                _time(v["idle_us"]),
                _time(v["span_us"]),
                _share(v["busy_us"], v["span_us"]),
                str(v["kernels"]),
                str(c["count"]),
                _time(c["total_us"]),
                _share(c["overlapped_us"], c["total_us"]),
            ]
        )
    return rows


def straggler_rows(doc: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(s["rank"]),
            str(s["last_count"]),
            _time(s["mean_late_us"]),
            _time(s["wait_caused_us"]),
        ]
        for s in doc["stragglers"]
    ]


def headline(doc: dict[str, Any]) -> list[str]:
    """The lines that say what matters: clocks, collectives, the worst straggler."""
    c = doc["collectives"]
    lines = [f"{len(doc['ranks'])} ranks; clocks aligned on {doc['clock']['aligned_on']}"]
    if c["count"]:
        lines.append(
            f"{c['count']} collectives matched across ranks; arrival skew median "
            f"{_time(c['skew_us']['median'])}, p99 {_time(c['skew_us']['p99'])}"
        )
    else:
        lines.append("no collectives matched across ranks")
    if doc["stragglers"]:
        s = doc["stragglers"][0]
        lines.append(
            f"straggler: rank {s['rank']} arrived last in {s['last_count']} of {c['count']} "
            f"collectives; the others waited {_time(s['wait_caused_us'])} for it"
        )
    return lines


def summary_text(summary: JobSummary) -> str:
    doc = summary.to_dict()
    parts = [
        "\n".join(headline(doc)),
        text_table(RANK_HEADERS, rank_rows(doc)),
    ]
    if doc["stragglers"]:
        parts.append(
            "stragglers (worst first):\n" + text_table(STRAGGLER_HEADERS, straggler_rows(doc))
        )
    if doc["warnings"]:
        parts.append("\n".join(f"warning: {w}" for w in doc["warnings"]))
    return "\n\n".join(parts)


def summary_bundle(summary: JobSummary) -> dict[str, str]:
    doc = summary.to_dict()
    body = "".join(f"<div>{esc(line)}</div>" for line in headline(doc))
    body += table(RANK_HEADERS, rank_rows(doc))
    if doc["stragglers"]:
        body += "<div>stragglers (worst first)</div>" + table(
            STRAGGLER_HEADERS, straggler_rows(doc)
        )
    body += "".join(f'<div class="warn">warning: {esc(w)}</div>' for w in doc["warnings"])
    return {"text/plain": summary_text(summary), "text/html": wrap(body)}


KERNEL_HEADERS = ["kernel", "rank", "calls", "total", "mean"]


def kernel_text(rows: list[dict[str, Any]]) -> str:
    """The job's kernel rows (rank, name, calls, total_ns), as a text table."""
    cells = [
        [
            r["name"] if len(r["name"]) <= 80 else r["name"][:79] + "…",
            str(r["rank"]),
            str(r["calls"]),
            format_ns(r["total_ns"]),
            format_ns(r["total_ns"] / max(r["calls"], 1)),
        ]
        for r in rows
    ]
    return text_table(KERNEL_HEADERS, cells)

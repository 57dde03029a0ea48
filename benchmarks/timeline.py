"""Timeline at scale: ``perflab timeline`` against plotly ``px.timeline`` (what Holistic
Trace Analysis uses) and a plain bokeh quad per event, on the same generated events.

Measures, per tool and event count: build time (the whole ``perflab timeline`` process,
parsing of a Kineto-style JSON file included; for the anchors, building and writing the HTML
from an in-memory DataFrame, which favours them), output size, and time to first paint in
headless Chromium (navigation start to the plot's canvas being drawn). Anchors are capped
where they cannot finish in reasonable time; the cap is recorded in the results.

    .venv/bin/python benchmarks/timeline.py [--events 1000000] [--anchor-cap 100000]

Writes benchmarks/results/timeline.json and prints a table (ratios against perflab).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNELS = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn>",
    "triton_per_fused_native_layer_norm_0",
    "flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::bfloat16_t>>",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>",
    "triton_poi_fused_add_mul_silu_1",
)
CPU_OPS = ("aten::linear", "aten::add", "aten::layer_norm", "aten::mm", "aten::silu")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def synthetic_trace(n: int, seed: int = 0, streams: int = 4) -> Any:
    """A training-like trace of about ``n`` events: per GPU kernel, a CPU op and its
    launch call on one CPU thread; kernels spread over ``streams`` streams with
    log-normal durations and idle gaps; NVTX-like ranges every 100 kernels."""
    from perflab.model.trace import EVENT_COLUMNS, KERNEL_COLUMNS, TRACK_COLUMNS, Table, Trace

    rng = np.random.default_rng(seed)
    k = max(1, n // 3)
    dur = rng.lognormal(np.log(8_000), 1.0, k).astype(np.int64) + 1_000  # ns
    gap = rng.exponential(3_000, k).astype(np.int64)
    stream = rng.integers(0, streams, k)
    kstart = np.zeros(k, np.int64)
    for s in range(streams):  # kernels on one stream never overlap
        rows = np.flatnonzero(stream == s)
        kstart[rows] = np.cumsum(dur[rows] * streams // 2 + gap[rows]) - dur[rows]
    launch = kstart - rng.integers(5_000, 50_000, k)
    op_start = launch - 2_000
    nranges = max(1, k // 100)
    range_rows = np.sort(rng.choice(k, nranges, replace=False))
    strings = [
        *KERNELS,
        *CPU_OPS,
        "cudaLaunchKernel",
        "forward",
        "<img src=x onerror=alert(1)>",
        "CPU thread 1",
        *[f"GPU 0 stream {s + 7}" for s in range(streams)],
    ]
    kname = rng.integers(0, len(KERNELS), k)
    kname[rng.random(k) < 1e-4] = strings.index("<img src=x onerror=alert(1)>")
    cols = {
        "start_ns": np.concatenate([kstart, op_start, launch, op_start[range_rows]]),
        "dur_ns": np.concatenate(
            [dur, launch - op_start + 4_000, np.full(k, 3_000), np.full(nranges, 200_000)]
        ),
        "kind": np.concatenate(
            [np.zeros(k), np.full(k, 3), np.full(k, 4), np.full(nranges, 5)]
        ).astype(np.int8),
        "track": np.concatenate([1 + stream, np.zeros(2 * k + nranges, np.int64)]),
        "name": np.concatenate(
            [
                kname,
                len(KERNELS) + rng.integers(0, len(CPU_OPS), k),
                np.full(k, strings.index("cudaLaunchKernel")),
                np.full(nranges, strings.index("forward")),
            ]
        ),
        "correlation": np.concatenate(
            [np.arange(k), np.full(k, -1), np.arange(k), np.full(nranges, -1)]
        ),
    }
    cols["start_ns"] = cols["start_ns"] + 1_700_000_000_000_000_000
    events = Table(EVENT_COLUMNS, cols)
    tracks = Table(
        TRACK_COLUMNS,
        {
            "rank": np.zeros(streams + 1),
            "device": np.array([4242] + [0] * streams),
            "stream": np.array([1] + [s + 7 for s in range(streams)]),
            "kind": np.array([1] + [0] * streams),
            "label": np.array(
                [strings.index("CPU thread 1")]
                + [strings.index(f"GPU 0 stream {s + 7}") for s in range(streams)]
            ),
        },
    )
    kernels = Table(
        KERNEL_COLUMNS,
        {
            "event": np.arange(k),
            "grid_x": rng.integers(1, 4096, k),
            "grid_y": np.ones(k),
            "grid_z": np.ones(k),
            "block_x": np.full(k, 256),
            "block_y": np.ones(k),
            "block_z": np.ones(k),
            "registers": rng.choice([32, 64, 128, 168], k),
            "shared_mem": rng.choice([0, 16384, 98304], k),
            "occupancy": np.full(k, np.nan),
        },
    )
    return Trace(events, tracks, strings, kernels=kernels, meta={"source": f"synthetic-{n}"})


def first_paint_ms(path: Path, plotly: bool = False) -> float | None:
    """Navigation start to the plot being drawn, in headless Chromium: bokeh's own
    "document idle" message (every view rendered), or plotly's first SVG layer."""
    if not Path("/usr/bin/chromium").exists():
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 800})
        idle: list[float] = []
        page.on(
            "console",
            lambda m: idle.append(time.perf_counter()) if "document idle" in m.text else None,
        )
        start = time.perf_counter()
        page.goto(path.as_uri(), timeout=600_000, wait_until="commit")
        if plotly:
            page.wait_for_selector(".main-svg", timeout=600_000)
            done = time.perf_counter()
        else:
            deadline = start + 600
            while not idle and time.perf_counter() < deadline:
                page.wait_for_timeout(5)
            done = idle[0] if idle else float("nan")
        browser.close()
    return (done - start) * 1000


def build_s(src: Path, out: Path, checkout: Path) -> float:
    """One ``perflab timeline`` process with the perflab of ``checkout``, timed."""
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "perflab.cli", "timeline", str(src), "-o", str(out)],
        check=True,
        timeout=600,
        capture_output=True,
        cwd=checkout,  # python -m imports perflab from here first
    )
    return time.perf_counter() - t


def run_perflab(n: int, tmp: Path, repeat: int, baseline: Path | None = None) -> dict[str, Any]:
    """The whole ``perflab timeline`` process, ``repeat`` times (median kept, all recorded:
    this machine's timings drift by tens of percent from run to run). With a ``baseline``
    checkout, each run pairs with one of its code, in alternating order, and the ratio of
    each pair is recorded: the machine's drift hits both sides of a pair alike."""
    from perflab.io import export_chrome

    src = tmp / f"trace-{n}.json"
    export_chrome(synthetic_trace(n), src)
    out = tmp / f"perflab-{n}.html"
    builds, before = [], []
    for i in range(repeat):
        if baseline is not None and i % 2 == 0:
            before.append(build_s(src, tmp / "baseline.html", baseline))
        builds.append(build_s(src, out, ROOT))
        if baseline is not None and i % 2 == 1:
            before.append(build_s(src, tmp / "baseline.html", baseline))
    paints = [first_paint_ms(out) for _ in range(repeat)]
    result = {
        "tool": "perflab timeline",
        "events": n,
        "build_s": statistics.median(builds),
        "all_build_s": builds,
        "input_mb": src.stat().st_size / 1e6,
        "output_mb": out.stat().st_size / 1e6,
        "first_paint_ms": _median_or_none(paints),
        "all_first_paint_ms": paints,
    }
    if baseline is not None:
        ratios = [new / old for new, old in zip(builds, before, strict=True)]
        result["baseline"] = {
            "commit": _commit(baseline),
            "build_s": statistics.median(before),
            "all_build_s": before,
            "ratio_per_pair": ratios,
            "ratio": statistics.median(ratios),
        }
    return result


def _commit(checkout: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def _median_or_none(values: list[float | None]) -> float | None:
    measured = [v for v in values if v is not None]
    return statistics.median(measured) if measured else None


def _frame(n: int) -> Any:
    trace = synthetic_trace(n)
    df = trace.to_pandas()
    df["end_ns"] = df["start_ns"] + df["dur_ns"]
    return df


def run_plotly(n: int, tmp: Path) -> dict[str, Any]:
    import pandas as pd
    import plotly.express as px

    df = _frame(n)
    df["start"] = pd.to_datetime(df["start_ns"])
    df["end"] = pd.to_datetime(df["end_ns"])
    out = tmp / f"plotly-{n}.html"
    t = time.perf_counter()
    fig = px.timeline(df, x_start="start", x_end="end", y="track_label", hover_name="name")
    fig.write_html(out, include_plotlyjs=True)
    build = time.perf_counter() - t
    return {
        "tool": "plotly px.timeline",
        "events": n,
        "build_s": build,
        "output_mb": out.stat().st_size / 1e6,
        "first_paint_ms": first_paint_ms(out, plotly=True),
    }


def run_bokeh_quads(n: int, tmp: Path) -> dict[str, Any]:
    from bokeh.embed import file_html
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure
    from bokeh.resources import INLINE

    df = _frame(n)
    out = tmp / f"bokeh-{n}.html"
    t = time.perf_counter()
    src = ColumnDataSource(
        {
            "left": df["start_ns"].to_numpy(np.float64),
            "right": df["end_ns"].to_numpy(np.float64),
            "bottom": df["track"].to_numpy(np.float64) - 0.4,
            "top": df["track"].to_numpy(np.float64) + 0.4,
            "name": df["name"].astype(str).tolist(),
        }
    )
    fig = figure(width=1100, height=300)
    quads = fig.quad(left="left", right="right", bottom="bottom", top="top", source=src)
    fig.add_tools(HoverTool(renderers=[quads], tooltips=[("name", "@name")]))
    out.write_text(file_html(fig, INLINE, "bokeh quads"), encoding="utf-8")
    build = time.perf_counter() - t
    return {
        "tool": "bokeh quad per event",
        "events": n,
        "build_s": build,
        "output_mb": out.stat().st_size / 1e6,
        "first_paint_ms": first_paint_ms(out),
    }


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (platform.processor() is often empty)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    names = [
        line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")
    ]
    return names[0] if names else ""


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("perflab", "numpy", "bokeh", "plotly", "playwright"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "absent"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument(
        "--anchor-cap",
        type=int,
        default=100_000,
        help="largest event count given to plotly and per-event bokeh",
    )
    ap.add_argument("--repeat", type=int, default=5, help="runs of perflab per size (median kept)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "timeline.json"))
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a checkout of earlier code (git worktree add DIR REV): its build times are "
        "measured in the same run, interleaved, and the ratios recorded",
    )
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        sizes = sorted({min(args.events, 100_000), args.events})
        for n in sizes:
            results.append(run_perflab(n, tmp, args.repeat, args.baseline))
            print(results[-1], flush=True)
        for n in sorted({min(args.anchor_cap, 10_000), min(args.anchor_cap, args.events)}):
            for anchor, needs in ((run_plotly, "plotly"), (run_bokeh_quads, "bokeh")):
                if importlib.util.find_spec(needs) is None:  # recorded, not guessed
                    results.append({"tool": anchor.__name__, "events": n, "skipped": needs})
                    continue
                results.append(anchor(n, tmp))
                print(results[-1], flush=True)
    goals = timeline_goals(results, args.events)
    doc = {
        "benchmark": "timeline",
        "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "processor": platform.processor() or cpu_model(),
            # the page is built and painted (Chromium --disable-gpu) on the CPU alone
            "gpu": "none used: every number is this CPU's",
        },
        "versions": versions(),
        "anchor_cap": args.anchor_cap,
        "note": f"anchors capped at {args.anchor_cap} events (plotly and one bokeh quad per "
        "event grow with every event in the file); anchors are timed from an "
        "in-memory DataFrame, perflab from a JSON file through a fresh process",
        "goals": goals,
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"\n{'tool':24s} {'events':>9s} {'build s':>8s} {'MB':>7s} {'paint ms':>9s}")
    for r in results:
        if "skipped" in r:
            print(f"{r['tool']:24s} {r['events']:9d} skipped: {r['skipped']} is not installed")
            continue
        paint = r["first_paint_ms"]
        print(
            f"{r['tool']:24s} {r['events']:9d} {r['build_s']:8.2f} {r['output_mb']:7.2f} "
            f"{paint if paint is None else round(paint):>9}"
        )
    by = {(r["tool"], r["events"]): r for r in results}
    for r in results:
        mine = by.get(("perflab timeline", r["events"]))
        if mine and r["tool"] != "perflab timeline" and "skipped" not in r:
            print(
                f"{r['tool']} at {r['events']} events: build {r['build_s'] / mine['build_s']:.1f}x"
                f" perflab's time, output {r['output_mb'] / mine['output_mb']:.1f}x its size"
            )
    for r in results:
        if "baseline" in r:
            b = r["baseline"]
            print(
                f"perflab timeline at {r['events']} events: {b['ratio']:.3f}x the build time "
                f"of {b['commit'][:10]} (median of {len(b['ratio_per_pair'])} interleaved pairs)"
            )
    for name, g in goals.items():
        verdict = "met" if g["met"] else "NOT met"
        print(f"goal {name} = {g['value']} (goal <= {g['goal']}): {verdict}")


GOALS = {"build_s": 3.0, "output_mb": 4.0, "first_paint_ms": 1500.0}


def timeline_goals(results: list[dict[str, Any]], events: int) -> dict[str, Any]:
    """The goals for ``perflab timeline`` at the largest event count."""
    mine = next(
        (r for r in results if r["tool"] == "perflab timeline" and r["events"] == events), {}
    )
    goals: dict[str, Any] = {}
    for key, limit in GOALS.items():
        value = mine.get(key)
        if value is not None:
            goals[key] = {"value": round(value, 3), "goal": limit, "met": value <= limit}
    return goals


if __name__ == "__main__":
    main()

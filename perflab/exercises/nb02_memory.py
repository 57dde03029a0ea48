"""Exercises of notebooks/02-memory-hierarchy.ipynb."""

from __future__ import annotations

from perflab.exercises import Spec
from perflab.exercises.checks import choice, number

NOTEBOOK = "02-memory-hierarchy"

EXERCISES = (
    Spec(
        "latency-or-bandwidth",
        NOTEBOOK,
        "A program walks a linked list of 10 million nodes scattered over 1 GB, reading one "
        "field per node. Is its speed set by memory 'latency' or by memory 'bandwidth'?",
        choice(
            "latency",
            ["latency", "bandwidth"],
            why={
                "latency": "Each node's address comes from the previous load: one load in "
                "flight at a time.",
                "bandwidth": "Bandwidth needs many independent loads in flight; where does a "
                "list walk find the address of its next load?",
            },
        ),
        "Latency. Every address depends on the previous load, so loads cannot overlap (Little's "
        "law: one line in flight). This is the pointer chase above: its bandwidth is a small "
        "fraction of the copy's. Software prefetching or a layout with independent accesses (an "
        "array of indices, several lists walked at once) is what helps.",
        worked="latency",
    ),
    Spec(
        "littles-law",
        NOTEBOOK,
        lambda v: (
            f"Little's law with this machine's numbers: {v['level']} copy bandwidth "
            f"{v['bandwidth_gbps']:.1f} GB/s, load latency {v['latency_ns']:.0f} ns. How many "
            "KiB must be in flight to sustain the copy? (Within 10%.)"
        ),
        number(
            lambda v: v["bandwidth_gbps"] * v["latency_ns"] / 1024,
            unit="KiB",
            rel=0.10,
            low="Multiply the bandwidth by the latency: GB/s x ns gives bytes.",
            high="Check the units: 1 GB/s x 1 ns = 1 byte, and 1 KiB is 1,024 bytes.",
        ),
        "Bandwidth x latency: GB/s x ns = bytes, divided by 1,024 for KiB. The cell after the "
        "exercises computes it, with the number of cache lines that amounts to.",
        worked=lambda v: f"{v['bandwidth_gbps'] * v['latency_ns'] / 1024:.1f} KiB",
        given={"level": "text", "bandwidth_gbps": "positive", "latency_ns": "positive"},
        answer_as='e.g. "40 KiB"',
    ),
)

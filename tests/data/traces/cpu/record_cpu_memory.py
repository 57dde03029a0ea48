"""How ``cpu_memory_train.json.gz`` was recorded: ``python record_cpu_memory.py OUT.json``
with torch 2.13 (CPU build), then ``gzip -9 -n``.

torch.profiler with CPU activities only and ``profile_memory=True`` (one ``[memory]``
instant event per allocation and free, Device Type 0), ``record_shapes=True``: a small
two-layer model trained with Adam for three profiled steps (one warm-up step before them),
each step's phases in ``record_function`` ranges (forward, backward, optimizer_step). The
loop keeps every step's logits in a list, as code that collects outputs for a metric does:
memory that grows by the same bytes each step and is never freed. The model is made before
the profiler starts and Adam makes its state in the warm-up step, as in most training code:
a CPU trace counts only what was allocated while the profiler ran (warm-up included), so
memory from before the first recorded event shows as allocated before the trace.
"""

from __future__ import annotations

import sys

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

STEPS = 4  # one warm-up step, three recorded


def main(out: str) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(32, 64)
    y = torch.randint(0, 10, (32,))
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    kept: list[torch.Tensor] = []  # the leak: every step's logits
    with profile(
        activities=[ProfilerActivity.CPU],
        profile_memory=True,
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=STEPS - 1, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        for _ in range(STEPS):
            with record_function("forward"):
                logits = model(x)
                loss = nn.functional.cross_entropy(logits, y)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer_step"):
                opt.step()
                opt.zero_grad()
            kept.append(logits.detach())
            prof.step()


if __name__ == "__main__":
    main(sys.argv[1])

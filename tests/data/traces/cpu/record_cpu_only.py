"""How ``cpu_only_train.json.gz`` was recorded: ``python record_cpu_only.py OUT.json`` with
torch 2.13 (CPU build), then ``gzip -9 -n``.

torch.profiler with CPU activities only (no GPU, no CUDA): a small convolutional model's
forward, loss, backward and SGD step over three profiled steps (one warm-up step before
them), each inside ``perflab.range("train_step")`` with ``record_function`` ranges for the
phases, while a second thread prepares the next batch inside its own ``load_batch`` range
(``profile_all_threads`` records that thread's ops too).
"""

from __future__ import annotations

import queue
import sys
import threading

import torch
from torch import nn
from torch._C._profiler import _ExperimentalConfig
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import perflab

STEPS = 4  # one warm-up step, three recorded


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.fc1 = nn.Linear(8 * 14 * 14, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(x)).flatten(1)
        return self.fc2(torch.relu(self.fc1(x)))


def loader(batches: queue.Queue[torch.Tensor]) -> None:
    for _ in range(STEPS):
        with record_function("load_batch"):
            batches.put((torch.randn(16, 3, 16, 16) * 0.5).contiguous())


def main(out: str) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    y = torch.randint(0, 10, (16,))
    batches: queue.Queue[torch.Tensor] = queue.Queue(maxsize=1)  # one batch ahead
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=STEPS - 1, repeat=1),
        experimental_config=_ExperimentalConfig(profile_all_threads=True),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        thread = threading.Thread(target=loader, args=(batches,), name="loader")
        thread.start()
        for _ in range(STEPS):
            x = batches.get()
            with perflab.range("train_step", nvtx=False):
                with record_function("forward"):
                    loss = nn.functional.cross_entropy(model(x), y)
                with record_function("backward"):
                    loss.backward()
                with record_function("optimizer"):
                    opt.step()
                    opt.zero_grad()
            prof.step()
        thread.join()


if __name__ == "__main__":
    main(sys.argv[1])

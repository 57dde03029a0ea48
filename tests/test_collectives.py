"""Collectives: nccl-tests' maths, the alpha-beta fit, and real gloo runs on 2 and 4
processes whose rows must satisfy the definitions and whose results were verified."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from perflab.analysis.collectives import (
    OPS,
    algbw_GBps,
    busbw_factor,
    busbw_GBps,
    fit_alpha_beta,
    message_bytes,
    per_rank_count,
)
from perflab.cli import main
from perflab.errors import InputError
from perflab.machine import collectives
from perflab.model.machine import AlphaBetaFit, CollectiveResult

# nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor
EXPECTED_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_busbw_factor_matches_nccl_tests(op, n):
    assert busbw_factor(op, n) == pytest.approx(EXPECTED_FACTOR[op](n))


def test_known_numbers():
    # 1 GB all_reduce on 8 ranks in 4 ms: algbw 250 GB/s, busbw 437.5 GB/s
    assert algbw_GBps(1e9, 4e-3) == pytest.approx(250.0)
    assert busbw_GBps("all_reduce", 1e9, 4e-3, 8) == pytest.approx(437.5)


def test_message_bytes_counts_the_whole_buffer_for_gather_scatter_all_to_all():
    assert message_bytes("all_reduce", 256, 4, 8) == 1024
    assert message_bytes("broadcast", 256, 4, 8) == 1024
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert message_bytes(op, 256, 4, 8) == 8 * 1024
        assert message_bytes(op, per_rank_count(op, 8192, 4, 8), 4, 8) == 8192


def test_maths_rejects_nonsense():
    with pytest.raises(ValueError, match="unknown collective"):
        busbw_factor("all_reduce_typo", 2)
    with pytest.raises(ValueError):
        busbw_factor("all_reduce", 0)
    with pytest.raises(ValueError):
        algbw_GBps(1024, 0.0)


def test_alpha_beta_fit_recovers_known_parameters():
    alpha, beta = 25e-6, 40e9  # 25 us, 40 GB/s
    sizes = np.logspace(3, 9, 13)
    fit = fit_alpha_beta(sizes, alpha + sizes / beta)
    assert fit.alpha_s == pytest.approx(alpha, rel=1e-6)
    assert fit.beta_Bps == pytest.approx(beta, rel=1e-6)
    assert fit.rel_rms < 1e-9
    assert fit.points == 13


def test_alpha_beta_fit_with_noise_stays_close():
    rng = np.random.default_rng(1)
    alpha, beta = 8e-6, 100e9
    sizes = np.repeat(np.logspace(3, 9, 7), 5)
    times = (alpha + sizes / beta) * (1 + 0.03 * rng.standard_normal(sizes.size))
    fit = fit_alpha_beta(sizes, times)
    assert fit.alpha_s == pytest.approx(alpha, rel=0.1)
    assert fit.beta_Bps == pytest.approx(beta, rel=0.1)
    assert 0.01 < fit.rel_rms < 0.06


def test_alpha_beta_fit_edge_cases():
    with pytest.raises(ValueError, match="two distinct"):
        fit_alpha_beta([1024, 1024], [1e-5, 1e-5])
    # pure bandwidth: the latency is clamped at zero, never negative
    sizes = np.array([1e6, 1e7, 1e8])
    fit = fit_alpha_beta(sizes, sizes / 1e10 - 1e-7)
    assert fit.alpha_s == 0.0
    assert fit.beta_Bps == pytest.approx(1e10, rel=0.01)
    # time that does not grow with size: no finite bandwidth, and it survives JSON
    flat = fit_alpha_beta([1e3, 1e6], [1e-3, 1e-3])
    assert math.isinf(flat.beta_Bps)
    assert AlphaBetaFit.from_dict(json.loads(json.dumps(flat.to_dict()))).beta_Bps == math.inf


def assert_rows_follow_definitions(result: CollectiveResult, n: int) -> None:
    for row in result.rows:
        assert row.verified, row
        assert row.world_size == n and row.backend == "gloo"
        seconds = row.time_us * 1e-6
        assert seconds > 0
        assert row.algbw_GBps == pytest.approx(row.bytes / seconds / 1e9, rel=1e-9)
        assert row.busbw_GBps == pytest.approx(
            row.algbw_GBps * EXPECTED_FACTOR[row.op](n), rel=1e-9
        )


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 4])
def test_gloo_runs_every_op_and_rows_follow_definitions(n, tmp_path):
    sizes = (4096, 65536)
    result = collectives.run(
        backend="gloo",
        world_size=n,
        ops=OPS,
        sizes=sizes,
        budget_ms=5,
        min_iters=2,
        max_iters=20,
        timeout_s=60,
        show_progress=False,
    )
    assert [(r.op, r.bytes) for r in result.rows] == [(op, s) for op in OPS for s in sizes]
    assert_rows_follow_definitions(result, n)
    assert set(result.fits) == set(OPS)
    # save, reload, same rows
    again = CollectiveResult.load(result.save(tmp_path / "coll.json"))
    assert [r.to_dict() for r in again.rows] == [r.to_dict() for r in result.rows]
    assert again.replayed_from is not None
    html = again._repr_mimebundle_()["text/html"]
    assert "busbw" in html and "replayed from" in html


@pytest.mark.slow
def test_cli_json_rows(capsys):
    code = main(
        [
            "machine",
            "collectives",
            "--backend",
            "gloo",
            "--world-size",
            "2",
            "--ops",
            "all_reduce,all_gather",
            "--sizes",
            "1K,1M",
            "--json",
        ]
    )
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["op"], r["bytes"]) for r in rows] == [
        ("all_reduce", 1024),
        ("all_reduce", 1 << 20),
        ("all_gather", 1024),
        ("all_gather", 1 << 20),
    ]
    for row in rows:
        assert set(row) == {
            "op",
            "bytes",
            "world_size",
            "backend",
            "time_us",
            "algbw_GBps",
            "busbw_GBps",
        }
        factor = EXPECTED_FACTOR[row["op"]](2)
        recomputed = row["bytes"] / (row["time_us"] * 1e-6) / 1e9 * factor
        assert row["busbw_GBps"] == pytest.approx(recomputed, rel=1e-9)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ops", "all_reduce,allreduce"], "unknown collective"),
        (["--sizes", "1K,lots"], "--sizes: not a size"),
        (["--world-size", "0"], "world size"),
    ],
)
def test_cli_bad_options_are_clean_errors(argv, message, capsys):
    assert main(["machine", "collectives", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error:") and message in err
    assert "Traceback" not in err


def test_nccl_without_gpus_says_no_gpu():
    from perflab.capture import env

    if env.cuda_available():
        pytest.skip("a GPU is present")
    with pytest.raises(Exception, match="no GPU"):
        collectives.run(backend="nccl", world_size=2)


def test_time_is_averaged_across_ranks_as_nccl_tests_does() -> None:
    """nccl-tests reports the average over ranks by default (-a 1); so does perflab."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist

    assert collectives.TIME_ACROSS_RANKS == "mean"
    assert "averaged across ranks" in (collectives.__doc__ or "")
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{collectives.free_port()}", rank=0, world_size=1
    )
    try:
        assert collectives._agree(torch, 3.0, "cpu", "mean") == 3.0
        assert collectives._agree(torch, 3.0, "cpu", "max") == 3.0
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(
    "bad", [{"timeout_s": 1e308}, {"timeout_s": float("nan")}, {"sizes": (2**70,)}]
)
def test_spec_refuses_absurd_numbers(bad: dict[str, object]) -> None:
    with pytest.raises(InputError):
        collectives.CollectiveSpec(**bad).validate()  # type: ignore[arg-type]


def test_spec_validation():
    with pytest.raises(InputError, match="message sizes"):
        collectives.run(sizes=(0,))
    with pytest.raises(InputError, match="launcher"):
        collectives.run(launcher="mpirun")


@pytest.mark.gpu
def test_nccl_on_gpus(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    n = torch.cuda.device_count()
    result = collectives.run(backend="nccl", world_size=n, ops=OPS, sizes=(1 << 20, 64 << 20))
    for row in result.rows:
        assert row.verified
        assert row.busbw_GBps == pytest.approx(row.algbw_GBps * EXPECTED_FACTOR[row.op](n))

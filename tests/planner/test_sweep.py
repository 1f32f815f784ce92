"""The plot of p99 TTFT against offered load."""

from __future__ import annotations

from pathlib import Path

from planner.simulate import Balancer
from planner.sweep import plot, sweep


def test_sweep_draws_both_balancers_and_writes_a_png(tmp_path: Path) -> None:
    points: list[int] = []
    curves = sweep(sizes=(3,), loads=(0.3, 0.95), seconds=120, on_point=lambda: points.append(1))
    assert [curve.balancer for curve in curves] == list(Balancer) and len(points) == 4
    for curve in curves:
        assert curve.p99_ttft_ms[1] > curve.p99_ttft_ms[0]  # more load, longer tail
    out = tmp_path / "plot.png"
    plot(curves, out)
    assert out.read_bytes().startswith(b"\x89PNG")

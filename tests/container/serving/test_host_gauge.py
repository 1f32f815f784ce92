"""The per-host gauge across replicas: replica 0 sums what every fresh replica posted."""

from __future__ import annotations

import os
import time
from pathlib import Path

from assistant.metrics import HostGauge
from serving.host_gauge import STALE_AFTER_S, HostGaugeBoard
from serving.replicas import ReplicaPlacement


def board(folder: Path, index: int, count: int) -> HostGaugeBoard:
    return HostGaugeBoard(folder, "assistant", ReplicaPlacement(index=index, count=count, tensor_parallel=8))


def test_one_replica_writes_its_own_counts_without_files(tmp_path: Path) -> None:
    only = board(tmp_path / "gauge", 0, 1)
    assert only.post(3, 1, 0.25, 32) == HostGauge(3, 1, 0.25, 32)
    assert not (tmp_path / "gauge").exists()


def test_replica_zero_writes_the_host_sum(tmp_path: Path) -> None:
    folder = tmp_path / "gauge"
    assert board(folder, 1, 3).post(5, 2, 0.5, 32) is None
    assert board(folder, 2, 3).post(1, 0, 0.1, 32) is None
    assert board(folder, 0, 3).post(4, 1, 0.3, 32) == HostGauge(10, 3, 0.3, 96)


def test_a_replica_that_stopped_posting_is_left_out(tmp_path: Path) -> None:
    folder = tmp_path / "gauge"
    board(folder, 1, 2).post(7, 7, 0.9, 32)
    stale = time.time() - STALE_AFTER_S - 5
    os.utime(folder / "assistant-1.json", (stale, stale))
    assert board(folder, 0, 2).post(1, 0, 0.2, 32) == HostGauge(1, 0, 0.2, 32)


def test_leaving_removes_the_file_and_the_last_one_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "gauge"
    first, second = board(folder, 0, 2), board(folder, 1, 2)
    first.post(0, 0, 0.0, 32)
    second.post(0, 0, 0.0, 32)
    first.leave()
    assert folder.exists() and not (folder / "assistant-0.json").exists()
    second.leave()
    assert not folder.exists()

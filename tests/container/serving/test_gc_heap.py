from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from serving.gc_heap import freeze_startup_heap


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as before


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_the_live_start_up_heap_is_frozen_and_full_collections_skip_it(unfrozen: None) -> None:
    kept = [_Node() for _ in range(1_000)]
    frozen = freeze_startup_heap()
    assert frozen >= len(kept)
    assert gc.get_freeze_count() == frozen
    # No generation (what collections walk) holds the start-up objects any more.
    assert not any(obj is kept[0] for obj in gc.get_objects())


_FINALIZED: list[str] = []


class _Finalized:
    def __init__(self) -> None:
        self.other: _Finalized | None = None

    def __del__(self) -> None:
        _FINALIZED.append("ran")


def test_freezing_runs_no_collection_and_so_no_finalizer(unfrozen: None) -> None:
    """With a collection inside initialize(), Triton never saw the models' load finish (serving/gc_heap.py):
    the freeze must not collect, nor run the finalizers a collection runs."""
    first, second = _Finalized(), _Finalized()
    first.other, second.other = second, first  # a cycle: only a collection would finalize it
    del first, second
    _FINALIZED.clear()
    freeze_startup_heap()
    assert _FINALIZED == []

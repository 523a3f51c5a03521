"""A prepared base of many ranks is frozen out of the collector's reach once made (`PureCache`'s
`freeze_at`), and freezing it pins nothing for good: what a prepared base holds has no reference
cycles, so an evicted one is freed by reference counting alone."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from app.services.plan_inputs import Prepared, engine_defaults, plan_input
from app.services.prepared import PureCache

GIB = 2**30


def _doc(n: int) -> dict[str, Any]:
    ranks = [{"label": f"n{i // 8}-gpu{i % 8}", "total": 80 * GIB, "free_at_start": 79 * GIB - i * 4096,
              "weights": 35 * GIB + i * 65536, "non_torch": GIB + i * 4096, "cuda_graphs": GIB // 2,
              "activation": 3 * GIB + i * 8192} for i in range(n)]  # fmt: skip
    return {"model": {"catalogue": "llama-3.1-70b"}, "layout": {"tp": 8, "dp": n // 8}, "ranks": ranks,
            "engine": {"max_model_len": 8192}, "whatif": {"gpu_memory_utilization": 0.85}}  # fmt: skip


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the session as it was


def test_a_large_prepared_base_is_frozen_once(unfrozen: None) -> None:
    cache: PureCache[Any] = PureCache(freeze_at=64)
    prepared = Prepared(cache, "big")
    before = gc.get_freeze_count()
    plan = plan_input(_doc(64), None, prepared)
    frozen = gc.get_freeze_count()
    assert frozen > before and len(plan.ranks) == 64
    plan_input({**_doc(64), "whatif": {"gpu_memory_utilization": 0.7}}, None, prepared)  # a tick: nothing new kept
    assert gc.get_freeze_count() == frozen
    small = Prepared(PureCache(freeze_at=4096), "small")
    plan_input(_doc(64), None, small)
    assert gc.get_freeze_count() == frozen  # below the bound: left to the collector


def test_prepared_values_hold_no_reference_cycles() -> None:
    cache: PureCache[Any] = PureCache(freeze_at=None)
    plan_input(_doc(64), None, Prepared(cache, "a"))
    engine_defaults(_doc(64), Prepared(cache, "a"))
    (base, _), settled = (cache.get_or_make(k, lambda: pytest.fail("made again"), len) for k in
                          (("plan", "a"), ("doc", "a")))  # fmt: skip
    held = [weakref.ref(base), weakref.ref(base.columns), weakref.ref(settled), weakref.ref(settled.doc)]
    del base, settled
    gc.disable()
    try:
        del cache
        assert [ref() for ref in held] == [None] * len(held)  # freed by reference counting, no collection
    finally:
        gc.enable()

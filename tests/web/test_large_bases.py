"""Large imported plans: stored base documents are immutable (never copied per request, never
changed by one) and the validated, built base is reused, so a tick only applies the what-if —
with exactly the result a fresh computation gives."""

from __future__ import annotations

import copy
import functools
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.services import imports
from app.services.base_documents import MemoryBaseStore
from app.services.prepared import PureCache
from app.web.app import create_app
from app.web.plan import views

from .support import HX, TestClient, make_settings

GIB, MIB = 2**30, 2**20
LOG14 = Path(__file__).parents[1] / "data" / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log"


def measured_base(n: int = 16) -> dict[str, Any]:
    """n measured ranks, every one different."""
    return {
        "model": {"catalogue": "llama-3.1-70b"},
        "layout": {"tp": 8, "dp": n // 8},
        "engine": {"max_model_len": 8192},
        "ranks": [
            {"label": f"n{i // 8}-gpu{i % 8}", "total": 80 * GIB, "free_at_start": 79 * GIB - i * MIB,
             "weights": 17 * GIB + i * 4096, "non_torch": GIB + i * 8192, "cuda_graphs": GIB // 2,
             "activation": 3 * GIB + i * MIB}
            for i in range(n)
        ],
    }  # fmt: skip


def logged_base() -> dict[str, Any]:
    """An imported log's run as the import stores it (measured ranks from the log)."""
    _, docs = imports.read_log(LOG14.read_text())
    doc = docs[0][0]
    assert doc is not None
    return doc


ticks = st.fixed_dictionaries(
    {},
    optional={
        "util": st.integers(50, 99).map(lambda n: f"{n / 100:.2f}"),
        "mnbt": st.sampled_from(["2048", "4096", "16384"]),
        "tp": st.sampled_from(["4", "8"]),
        "growth": st.sampled_from(["0", "0.05", "0.2"]),
        "reserve": st.sampled_from(["0", "512MiB"]),
        "live": st.sampled_from(["2000", "12000"]),
    },
)
BASES = MemoryBaseStore()
MEASURED, LOGGED = BASES.put(measured_base()), BASES.put(logged_base())
SHARED = views.PlanCache()


@settings(max_examples=40, deadline=None)
@given(tick=ticks, base=st.sampled_from([MEASURED, LOGGED]))
def test_a_tick_on_a_prepared_base_gives_what_a_fresh_computation_gives(tick: dict[str, str], base: str) -> None:
    query = {"base": base, **tick}
    fresh = _outcome(lambda: views.plan_view(query, BASES, levers=True))
    reused = _outcome(lambda: views.plan_view(query, BASES, levers=True, cache=_no_views(SHARED)))
    assert reused == fresh


def _no_views(cache: views.PlanCache) -> views.PlanCache:
    """The shared prepared-plan cache behind an empty per-query cache (so every call recomputes)."""
    fresh = views.PlanCache()
    fresh.prepared = cache.prepared
    return fresh


def _outcome(run: Any) -> object:
    try:
        view = run()
    except InputError as exc:
        return ("error", exc.field, exc.message)
    return view.result, view.url


def test_a_bad_what_if_on_a_prepared_base_names_its_field() -> None:
    cache = views.PlanCache()
    views.plan_view({"base": MEASURED, "util": "0.8"}, BASES, cache=cache)  # the base is prepared now
    for key, value in (("util", "1.5"), ("mnbt", "0"), ("tp", "3")):
        with pytest.raises(InputError) as fresh:
            views.plan_view({"base": MEASURED, key: value}, BASES)
        with pytest.raises(InputError) as reused:
            views.plan_view({"base": MEASURED, key: value}, BASES, cache=cache)
        assert (reused.value.field, reused.value.message) == (fresh.value.field, fresh.value.message)


def test_the_store_hands_out_the_stored_document_itself_and_requests_never_change_it() -> None:
    app = create_app(make_settings())
    doc = measured_base(64)
    base_id = app.state.bases.put(doc)
    doc["ranks"].clear()  # the caller's own dict: the store kept a copy of its own
    stored = app.state.bases.get(base_id)
    assert stored is app.state.bases.get(base_id)  # no copy per request
    before = copy.deepcopy(stored)
    with TestClient(app) as client:
        for i, extra in enumerate(({}, {"tp": "4"}, {"growth": "0.1"}, {"reserve": "1GiB"}, {"mnbt": "4096"})):
            for headers in (HX, {}):
                r = client.get("/plan", params={"base": base_id, "util": f"0.{80 + i}", **extra}, headers=headers)
                assert r.status_code in (200, 303), r.text[:300]
            assert client.get("/plan.json", params={"base": base_id, **extra}).status_code == 200
            assert client.get("/sim", params={"base": base_id, **extra}).status_code == 200
    assert app.state.bases.get(base_id) == before


def test_prepared_bases_are_reused_per_base_and_bounded() -> None:
    cache = views.PlanCache()
    cache.prepared = PureCache(capacity=4, max_weight=10_000)
    for util in ("0.8", "0.81", "0.82"):
        views.plan_view({"base": MEASURED, "util": util}, BASES, cache=cache)
    assert len(cache.prepared) == 2  # the defaults' document and the built plan, once for all ticks
    views.plan_view({"base": MEASURED, "growth": "0.1"}, BASES, cache=cache)  # a new non-what-if value
    views.plan_view({"base": LOGGED, "util": "0.8"}, BASES, cache=cache)
    assert len(cache.prepared) == 4  # bounded: the oldest went out
    assert cache.prepared.weight <= 10_000


def test_the_pure_cache_bounds_entries_and_weight_and_makes_each_key_once() -> None:
    cache: PureCache[list[int]] = PureCache(capacity=3, max_weight=10)
    made: list[str] = []

    def make(key: str, size: int) -> list[int]:
        def build() -> list[int]:
            made.append(key)
            return [0] * size

        return cache.get_or_make(key, build, len)

    first = make("a", 2)
    assert make("a", 2) is first and made == ["a"]
    make("b", 3), make("c", 4)
    assert len(cache) == 3 and cache.weight == 9
    make("d", 2)  # weight 11 > 10 and 4 entries > 3: the least recently used goes ("a")
    assert len(cache) == 3 and cache.weight == 9 and make("a", 2) is not first
    heavy = make("huge", 11)  # heavier than the whole bound: returned, not kept
    assert len(heavy) == 11 and cache.weight <= 10 and make("huge", 11) is not heavy


def test_the_pure_cache_is_safe_under_threads() -> None:
    cache: PureCache[tuple[int, ...]] = PureCache(capacity=16, max_weight=1_000)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for i in range(300):
                key = (worker * 7 + i) % 40
                assert cache.get_or_make(key, functools.partial(_row, key), len)[0] == key
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) <= 16 and cache.weight == sum(len(_row(k)) for k in cache._items if isinstance(k, int))


def _row(key: int) -> tuple[int, ...]:
    return (key,) * (key % 5 + 1)


def test_the_plan_cache_is_bounded_by_the_ranks_its_results_hold() -> None:
    cache = views.PlanCache(capacity=100, max_ranks=40)
    for util in ("0.80", "0.81", "0.82"):  # 16 ranks each (+1): the third pushes the first out
        views.plan_view({"base": MEASURED, "util": util}, BASES, cache=cache)
    assert cache.get(((("base", MEASURED), ("util", "0.80")), None)) is None
    assert cache.get(((("base", MEASURED), ("util", "0.82")), None)) is not None

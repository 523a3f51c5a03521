"""A slider tick that reuses the terms of earlier ticks (`app.services.plan_terms`) gives exactly
the result, or exactly the error, of computing the plan afresh.

Differential: random sequences of what-if queries (a user dragging sliders, switching the model,
the GPU, the layout, and sometimes typing a value the validator refuses) go through one
`PlanTerms` and through the uncached path, and every answer is compared whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.ingest import catalogue
from app.services import plan_inputs, plan_query, plan_terms, plans
from app.services.base_documents import MemoryBaseStore
from app.services.plan_terms import PlanTerms
from app.web.plan import views

# A dense model, a MoE, a hybrid (sliding window), a vision MoE and a Mamba hybrid.
MODELS = ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b-it", "qwen3-vl-30b-a3b-instruct", "jamba-1.5-mini")
GPUS = ("H100 80GB", "A100 40GB", "RTX 3090", "48GiB")

knob_values: dict[str, st.SearchStrategy[str]] = {
    # utilization moves on nearly every tick: mostly valid, sometimes 0 or above 1 (refused).
    "util": st.one_of(st.integers(5, 100).map(lambda u: f"{u / 100:.2f}"), st.sampled_from(["0", "1.5", "0.955"])),
    "mnbt": st.one_of(st.integers(1, 64).map(lambda k: str(256 * k)), st.sampled_from(["0", "100", "20000000"])),
    "tp": st.sampled_from(["1", "2", "4", "8", "3"]),
    "model": st.sampled_from(MODELS),
    "gpu": st.sampled_from(GPUS),
    "kv_dtype": st.sampled_from(["auto", "fp8"]),
    "block_size": st.sampled_from(["16", "32", "0"]),
    "max_num_seqs": st.sampled_from(["64", "256", "1024"]),
    "max_model_len": st.sampled_from(["4096", "32768", "100000000"]),
    "growth": st.sampled_from(["0", "0.1"]),
    "quant": st.sampled_from(["fp8"]),
    "live": st.sampled_from(["2000"]),
    "vllm": st.sampled_from(["0.8.5", "0.11.0", "0.6.0"]),
}
OTHERS = sorted(k for k in knob_values if k not in ("util", "mnbt"))
#: One tick: mostly a slider (utilization, the prefill chunk or both), now and then another field.
tick = st.one_of(
    st.fixed_dictionaries({"util": knob_values["util"]}),
    st.fixed_dictionaries({"mnbt": knob_values["mnbt"]}),
    st.fixed_dictionaries({"util": knob_values["util"], "mnbt": knob_values["mnbt"]}),
    st.sampled_from(OTHERS).flatmap(lambda key: knob_values[key].map(lambda value: {key: value})),
)


def _answer(run: Any) -> object:
    try:
        return run()
    except InputError as exc:
        return ("error", exc.field, exc.message)


def _queries(ticks: list[dict[str, str]]) -> list[dict[str, str]]:
    """Each tick changes its knobs on top of the query before it, as a form does."""
    out, query = [], {"model": "llama-3.1-8b"}
    for changed in ticks:
        query = {**query, **changed}
        out.append(dict(query))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tick, min_size=1, max_size=12), st.booleans())
def test_cached_terms_give_the_fresh_result_over_random_knob_sequences(
    ticks: list[dict[str, str]], with_levers: bool
) -> None:
    terms = PlanTerms()
    for query in _queries(ticks):
        doc = _answer(lambda q=query: plan_query.plan_from_query(q))
        if not isinstance(doc, dict):
            continue  # the query itself is refused before any plan is built
        fresh = _answer(lambda d=doc: plans.run_plan(d, with_levers=with_levers))
        cached = _answer(lambda d=doc: plans.run_plan(d, with_levers=with_levers, terms=terms))
        assert cached == fresh, query


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(tick, min_size=1, max_size=8))
def test_the_plan_page_with_its_caches_answers_as_without_them(ticks: list[dict[str, str]]) -> None:
    """The whole tick (defaults, canonical URL, plan) with the app's caches, against none."""
    bases, cache = MemoryBaseStore(), views.PlanCache()
    for query in _queries(ticks):
        fresh = _answer(lambda q=query: views.plan_view(q, bases, False))
        cached = _answer(lambda q=query: views.plan_view(q, bases, False, cache))
        assert cached == fresh, query


def test_a_tick_reuses_the_terms_the_knob_does_not_reach() -> None:
    """Utilization reaches no term: ten ticks build the document and plan input once. A new
    prefill chunk builds a new plan input from the same validated document."""
    terms = PlanTerms()
    built = []
    real = plan_inputs.build_base_plan

    def counting(doc: Any, read_log: Any = None) -> Any:
        built.append(doc.engine.max_num_batched_tokens)
        return real(doc, read_log)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan_terms, "build_base_plan", counting)
        for u in range(50, 60):
            doc = plan_query.plan_from_query({"tp": "8", "util": f"0.{u}", "mnbt": "2048"})
            assert terms.plan_input(doc) == plan_inputs.plan_input(doc)
        assert built == [2048]
        doc = plan_query.plan_from_query({"tp": "8", "util": "0.5", "mnbt": "4096"})
        assert terms.plan_input(doc) == plan_inputs.plan_input(doc)
    assert built == [2048, 4096]
    assert len(terms) == 3  # one validated document, two plan inputs


def test_the_terms_are_bounded() -> None:
    terms = PlanTerms(capacity=4)
    for k in range(1, 20):
        terms.plan_input(plan_query.plan_from_query({"mnbt": str(256 * k)}))
    assert len(terms) <= 4


def test_a_changed_catalogue_entry_is_a_new_key(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = plan_query.plan_from_query({"model": "qwen3-8b"})
    before = plan_terms.document_key(doc)
    entry = catalogue.find_model("qwen3-8b")
    assert entry is not None and before is not None and entry.sha256 in before[2]
    from dataclasses import replace

    changed = replace(entry, sha256="0" * 64)
    monkeypatch.setattr(plan_terms, "find_model", lambda name: changed if name == "qwen3-8b" else None)
    after = plan_terms.document_key(doc)
    assert after is not None and after != before


@pytest.mark.parametrize(
    "doc",
    [
        {"model": {"catalogue": "llama-3.1-8b"}, "ranks": [{"total": 80 * 2**30, "kv_room": 2**30}]},
        {"from_log": "log text", "model": {"catalogue": "llama-3.1-8b"}},
        {"serve": "vllm serve meta-llama/Llama-3.1-8B", "gpu": {"name": "H100 80GB"}},
        {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "engine": "not a section"},
        {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "notes": [float("nan")]},
    ],
)
def test_documents_the_terms_do_not_serve_take_the_uncached_path(doc: Mapping[str, object]) -> None:
    assert plan_terms.document_key(doc) is None


def test_a_small_plan_keeps_its_columns_and_weighs_what_they_hold() -> None:
    """Up to COLUMNS_MAX_RANKS ranks the plan input is kept with its ranks' columns (the ticks of one
    prefill chunk share them), weighed COLUMNS_WEIGHT times its ranks; a larger one is kept as built."""
    terms = PlanTerms()
    for count, kept in ((8, True), (plan_terms.COLUMNS_MAX_RANKS, True), (plan_terms.COLUMNS_MAX_RANKS + 8, False)):
        doc = plan_query.plan_from_query({"model": "llama-3.1-8b", "tp": "8", "util": "0.5"})
        doc["gpu"] = {**doc["gpu"], "count": count}
        before = terms.cache.weight
        first = terms.plan_input(doc)
        second = terms.plan_input({**doc, "engine": {**doc["engine"], "gpu_memory_utilization": 0.6}})
        if kept:
            assert first.columns is not None and second.columns is first.columns
        else:
            assert first.columns is None and second.columns is None
        assert replace(first, columns=None) == plan_inputs.plan_input(doc)  # columns aside, the same input
        added = terms.cache.weight - before - 1  # less the validated document's entry
        assert added == (plan_terms.COLUMNS_WEIGHT if kept else 1) * count + 1

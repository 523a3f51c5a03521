"""Slider ticks on a stored base of DISTINCT measured ranks (issue 14): the app's path (the base
validated and prepared once per document id, the plan cache, rows made when read:
`app.core.json_rows.JsonRows`) shows what a from-scratch computation shows.

For each what-if, through one app as htmx sends them: the fragment equals, byte for byte, the
fragment rendered from `plans.run_plan` on the tick's document (no cache, no prepared base, plain
lists), and `/plan.json` equals that result as JSON. The what-ifs include utilizations where a
different rank binds (two GPU sizes: the smaller GPU's ranks bind at high utilization, the larger's
at low), plans past the page's 64 bars (the notable rows) and a rank that does not start.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

import pytest

from app.core import plan as core_plan
from app.core import report
from app.core.json_rows import JsonRows, plain_result
from app.services import plan_inputs, plans
from app.web.app import create_app
from app.web.plan import present, routes, views

from .support import HX, TestClient, make_settings

GIB, MIB = 2**30, 2**20
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
    "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}  # fmt: skip
WHATIFS = [{"util": "0.90"}, {"util": "0.62"}, {"util": "0.95", "growth": "0.02"}, {"util": "0.70"},
           {"util": "0.90"}, {"util": "0.84"}]  # fmt: skip


def _ranks(n: int, refusing: int | None) -> list[dict[str, Any]]:
    """n distinct ranks, every other one on a 48 GiB GPU holding less (so which rank binds moves
    with the utilization); `refusing`: that rank has too little free memory to start."""
    out = []
    for i in range(n):
        small = i % 2 == 1
        out.append({
            "label": f"n{i // 8}-gpu{i % 8}",
            "total": (48 if small else 80) * GIB,
            "free_at_start": (47 if small else 79) * GIB - i * 4096,
            "weights": (15 if small else 35) * GIB + (i * 7919) % 997 * MIB // 64,
            "non_torch": GIB + (i * 104729) % 1009 * 4096,
            "cuda_graphs": GIB // 2 + (i * 31) % 257 * MIB,
            "activation": 3 * GIB + i * 8192,
        })  # fmt: skip
    if refusing is not None:
        out[refusing]["free_at_start"] = 20 * GIB
    return out


def _base(n: int, refusing: int | None = None) -> dict[str, Any]:
    return {
        "model": {"config": CONFIG},
        "layout": {"tp": 8, "dp": max(1, n // 8)},
        "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192},
        "policy": {"growth_reserve": 0.08, "operating_reserve": "0.9 GiB", "avg_live_tokens": 4000},
        "ranks": _ranks(n, refusing),
    }


def _from_scratch(app: Any, query: dict[str, str]) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The tick's plan computed afresh (its document by a view with no cache; `run_plan` with no
    prepared base, plain lists), the fragment rendered from it, and its JSON twin."""
    view = views.plan_view(query, app.state.bases, False)
    result = plans.run_plan(view.doc, with_levers=False)
    context = {**present.plan_context(views.PlanView(**{**view.__dict__, "result": result}), form=False),
               "token_required": False, "fragment": True}
    html = app.state.templates.render_blocks(routes.PLAN, context, list(routes.PLAN_FRAGMENT))
    twin = {**plans.run_plan(view.doc, with_levers=True), "url": view.url}
    return result, html, json.loads(json.dumps(twin))


@pytest.mark.parametrize(("n", "refusing"), [(40, None), (200, None), (200, 77), (1024, None)])
def test_ticks_on_distinct_ranks_show_the_from_scratch_plan(n: int, refusing: int | None) -> None:
    app = create_app(make_settings())
    base_id = app.state.bases.put(_base(n, refusing))
    shown: list[dict[str, Any]] = []
    app.state.templates.listeners.append(lambda event: shown.append(dict(event.context)))
    bindings = set()
    with TestClient(app) as client:
        for tick, whatif in enumerate(WHATIFS):
            query = {"base": base_id, **whatif}
            shown.clear()
            response = client.get(f"/plan?{urllib.parse.urlencode(query)}", headers=HX)
            assert response.status_code == 200, query
            result, html, twin = _from_scratch(app, query)
            cached = shown[0]["result"]
            # the first tick on the base makes its templates (and lists its rows); a utilization tick
            # after it reads them, and makes only the rows the page reads
            if tick > 0 and set(whatif) == {"util"} and whatif not in WHATIFS[:tick]:  # not a cached view
                assert isinstance(cached["ranks"], JsonRows), query
            assert plain_result(cached) == result, query  # the numbers behind the fragment
            assert response.text == html, query
            got = client.get(f"/plan.json?{urllib.parse.urlencode(query)}")
            assert got.status_code == 200 and got.json() == twin, query
            bindings.add(result["binding_rank"])
            assert result["will_start"] is (refusing is None), query
    assert len(bindings) >= 2, "the what-ifs move which rank binds"


def test_rows_are_listed_where_the_templates_are_new() -> None:
    """Rows made when read keep their columns alive: a result whose ranks' templates this very
    result makes (a first tick, a what-if making new ranks such as a prefill-chunk tick) lists them."""
    doc = _base(96)
    assert isinstance(plans.run_plan(doc, with_levers=False, lazy_rows=True)["ranks"], list)
    app = create_app(make_settings())
    base_id = app.state.bases.put(doc)
    for query, made in (({"util": "0.8"}, False), ({"util": "0.7"}, True), ({"mnbt": "4096"}, False)):
        view = views.plan_view({"base": base_id, **query}, app.state.bases, False, app.state.plan_cache)
        assert isinstance(view.result["ranks"], JsonRows) is made, query


@pytest.mark.parametrize("refusing", [None, 5])
def test_rows_read_one_by_one_are_the_listed_rows(refusing: int | None) -> None:
    """`JsonRows`' single-row formulas (`row`) give the rows its column passes give (`every`),
    read in any order; the first-binding and not-starting positions are the rows' own flags."""
    doc = {**_base(96, refusing), "engine": {"gpu_memory_utilization": 0.66, "max_model_len": 8192}}
    result = core_plan.compute(plan_inputs.plan_input(doc))
    plain = report.result_to_dict(result)  # makes the ranks' templates: the rows read them from now on
    lazy = report.result_to_dict(result, lazy=True)
    for key, rows, expected in (("ranks", lazy["ranks"], plain["ranks"]),
                                ("budget", lazy["uniform_budget"]["ranks"], plain["uniform_budget"]["ranks"])):
        assert isinstance(rows, JsonRows), key
        picked = [rows[i] for i in reversed(range(len(rows)))][::-1]
        assert picked == expected and rows[-1] == expected[-1] and rows[3:9] == expected[3:9], key
        assert list(rows) == expected and rows == expected and rows[7] is picked[7], key
    ranks = lazy["ranks"]
    flagged = [i for i, r in enumerate(plain["ranks"]) if r["binding"]]
    assert ranks.first_binding == (flagged[0] if flagged else None) and flagged
    assert list(ranks.not_starting) == [i for i, r in enumerate(plain["ranks"]) if not r["will_start"]]
    assert (refusing in ranks.not_starting) is (refusing is not None)

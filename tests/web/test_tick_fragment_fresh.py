"""A slider tick's fragment, served through the whole app (middleware, the plan cache, the plan
input's terms, the app's memo, the presenter), is the fragment a fresh full plan gives.

Differential: random sequences of what-if queries (mostly slider moves, now and then another
knob, sometimes a value the validator refuses) go through one app, as htmx sends them; each
answer is compared with the plan computed afresh (`plans.run_plan` on the tick's document, no
cache, no memo) and with the fragment rendered from that fresh result: the numbers the fragment
shows (KPIs, admission values) and then the whole fragment, byte for byte.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.services import plans
from app.services.base_documents import MemoryBaseStore
from app.web.app import create_app
from app.web.plan import present, routes, views

from .support import HX, TestClient, make_settings

MODELS = ("llama-3.1-8b", "qwen3-30b-a3b", "gemma-2-9b-it")
KNOBS: dict[str, st.SearchStrategy[str]] = {
    "util": st.one_of(st.integers(30, 99).map(lambda u: f"{u / 100:.2f}"), st.sampled_from(["0", "1.5"])),
    "mnbt": st.one_of(st.integers(2, 64).map(lambda k: str(256 * k)), st.sampled_from(["100"])),
    "tp": st.sampled_from(["1", "2", "4", "8"]),
    "model": st.sampled_from(MODELS),
    "gpu": st.sampled_from(["H100 80GB", "A100 40GB", "48GiB"]),
    "kv_dtype": st.sampled_from(["auto", "fp8"]),
    "max_model_len": st.sampled_from(["4096", "32768", "100000000"]),
}
OTHERS = sorted(k for k in KNOBS if k not in ("util", "mnbt"))
TICK = st.one_of(
    st.fixed_dictionaries({"util": KNOBS["util"]}),
    st.fixed_dictionaries({"mnbt": KNOBS["mnbt"]}),
    st.fixed_dictionaries({"util": KNOBS["util"], "mnbt": KNOBS["mnbt"]}),
    st.sampled_from(OTHERS).flatmap(lambda key: KNOBS[key].map(lambda value: {key: value})),
)
#: The numbers a fragment shows: each KPI's value and each admission row's value.
NUMBERS = re.compile(r'data-kpi="([^"]+)">\s*<div class="label">[^<]*</div>\s*<div class="value">([^<]*)<'
                     r'|id="adm-([^"]+)">([^<]*)<')


def _numbers(html: str) -> dict[str, str]:
    return {kpi or f"adm-{adm}": value or adm_value for kpi, value, adm, adm_value in NUMBERS.findall(html)}


def _fresh_fragment(app: Any, query: dict[str, str]) -> tuple[dict[str, Any], str] | None:
    """The tick's plan computed afresh (no plan cache, terms or memo) and its fragment; None when
    the query is refused."""
    try:
        view = views.plan_view(query, MemoryBaseStore(), False)
    except InputError:
        return None
    result = plans.run_plan(view.doc, with_levers=False)
    context = {**present.plan_context(views.PlanView(**{**view.__dict__, "result": result}), form=False),
               "token_required": False, "fragment": True}
    return result, app.state.templates.render_blocks(routes.PLAN, context, list(routes.PLAN_FRAGMENT))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TICK, min_size=2, max_size=10))
def test_a_ticks_fragment_is_the_fresh_plans_fragment(ticks: list[dict[str, str]]) -> None:
    app = create_app(make_settings())
    results: list[dict[str, Any]] = []
    app.state.templates.listeners.append(lambda event: results.append(dict(event.context)))
    query = {"model": "llama-3.1-8b", "tp": "8"}
    with TestClient(app) as client:
        for changed in ticks:
            query = {**query, **changed}
            results.clear()
            response = client.get(f"/plan?{urllib.parse.urlencode(query)}", headers=HX)
            fresh = _fresh_fragment(app, query)
            if fresh is None:  # refused: the fragment names the field, no plan is shown
                assert response.status_code in (200, 422) and "field-error" in response.text, query
                continue
            result, html = fresh
            assert response.status_code == 200, query
            shown = results[0]["result"]
            assert dict(shown) == result, query  # the numbers behind the fragment
            assert _numbers(response.text) == _numbers(html) and len(_numbers(html)) >= 10, query
            assert response.text == html, query

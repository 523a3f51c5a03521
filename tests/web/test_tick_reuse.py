"""A long slider drag through one app gives, tick by tick, exactly what computing each position
from scratch gives: the fragment byte for byte and the JSON twin whole.

A seeded loop (not a few hypothesis examples): hundreds of positions through the same app, so
every reuse a tick makes is exercised many times over — the plan input's terms and its ranks'
columns kept across the ticks of one prefill chunk (`app.services.plan_terms`), the per-rank
JSON templates those columns hold (`app.core.report_ranks._templates`), the app's memo, the
plan cache's revisits and the pool chart's shared columns (`app.web.plan.pool_svg`). From
scratch is `views.plan_view` without a cache (so without the terms or any memo) and the
fragment rendered from its view.
"""

from __future__ import annotations

import random
import urllib.parse
from typing import Any

from app.services.base_documents import MemoryBaseStore
from app.web.app import create_app
from app.web.plan import present, routes, views

from .support import HX, TestClient, make_settings

#: (structural query, positions): a dense model over 8 ranks, a MoE, a hybrid on a smaller card.
DRAGS = (
    ({"model": "llama-3.1-8b", "tp": "8"}, 110),
    ({"model": "qwen3-30b-a3b", "tp": "2"}, 40),
    ({"model": "gemma-2-9b-it", "tp": "1", "gpu": "A100 40GB"}, 40),
)


def _positions(rng: random.Random, count: int) -> list[dict[str, str]]:
    """A drag: utilization moves on every tick, the prefill chunk now and then (so several ticks
    share one chunk's terms), and now and then a position seen before (a plan cache hit)."""
    out: list[dict[str, str]] = []
    chunk = 512
    for _ in range(count):
        if out and rng.random() < 0.1:
            out.append(rng.choice(out))
            continue
        if rng.random() < 0.15:
            chunk = 256 * rng.randint(1, 64)
        out.append({"util": f"{rng.randint(30, 99) / 100:.2f}", "mnbt": str(chunk)})
    return out


def _fragment_from_scratch(app: Any, query: dict[str, str]) -> str:
    """The fragment of `query`, computed with no cache and no memo."""
    view = views.plan_view(query, MemoryBaseStore(), False)
    context = {**present.plan_context(view, form=False), "token_required": False, "fragment": True}
    html: str = app.state.templates.render_blocks(routes.PLAN, context, list(routes.PLAN_FRAGMENT))
    return html


def test_every_tick_of_a_long_drag_equals_its_position_computed_from_scratch() -> None:
    rng = random.Random(20261202)
    app = create_app(make_settings())
    checked = 0
    with TestClient(app) as client:
        for structure, count in DRAGS:
            for position in _positions(rng, count):
                query = {**structure, **position}
                path = urllib.parse.urlencode(query)
                fragment = client.get(f"/plan?{path}", headers=HX)
                assert fragment.status_code == 200, query
                assert fragment.text == _fragment_from_scratch(app, query), query
                if checked % 4 == 0:  # the JSON twin (with its levers, the slower half) every fourth tick
                    twin = client.get(f"/plan.json?{path}")
                    assert twin.status_code == 200, query
                    assert twin.json() == views.plan_json(views.plan_view(query, MemoryBaseStore(), True)), query
                checked += 1
    assert checked == sum(count for _, count in DRAGS)
    assert len(app.state.plan_cache.terms) > 0  # the drag went through the reused terms

"""The plan page's work between a request and `app.services.plans`: what-if query → canonical plan.

`plan_view` resolves the optional base document, drops slider values that equal the plan's
effective defaults (so the canonical URL stays short although a range input always submits a
value), builds and runs the plan, and returns the canonical query and URL. Presentation of the
result (KPIs, admission rows, the rank table, form values) lives in `present.py`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.errors import InputError
from app.services import plan_query, plans
from app.services.base_documents import BaseStore
from app.web import querystring

#: Keys that decide the plan's structure and so its effective defaults.
STRUCTURAL_KEYS = ("base", "model", "gpu_total", "ranks", "tp", "pp", "dp", "vllm")
#: Range inputs always submit a value; equal to the effective default, it is dropped.
SLIDER_DEFAULTS = {"util": "gpu_memory_utilization", "mnbt": "max_num_batched_tokens"}
#: Plans with more ranks than this compute their levers in a follow-up request.
INLINE_LEVERS_MAX_RANKS = 64


@dataclass(frozen=True)
class PlanView:
    query: dict[str, str]
    url: str
    doc: dict[str, Any]
    base_doc: dict[str, Any] | None
    result: dict[str, Any]
    defaults: dict[str, float]


def resolve_base(query: Mapping[str, str], bases: BaseStore) -> dict[str, Any] | None:
    """The stored base document a query names with `base=`, or None."""
    base_id = query.get("base")
    if base_id is None:
        return None
    doc = bases.get(base_id)
    if doc is None:
        raise InputError(
            "base", f"no stored plan document has the id {base_id!r}; import the log or config again"
        )
    return doc


def effective_defaults(query: Mapping[str, str], base_doc: Mapping[str, Any] | None) -> dict[str, float]:
    """Slider values the plan would use if the query did not set them (memoised per structure)."""
    structure = {k: v for k, v in query.items() if k in STRUCTURAL_KEYS}
    key = tuple(sorted(structure.items()))
    cached = _DEFAULTS_CACHE.get(key)
    if cached is not None:
        return cached
    try:
        engine = plans.run_plan(plan_query.plan_from_query(structure, base_doc), with_levers=False)["engine"]
    except InputError:
        return {}
    defaults = {q: float(engine[e]) for q, e in SLIDER_DEFAULTS.items() if engine.get(e) is not None}
    if len(_DEFAULTS_CACHE) >= 1024:
        _DEFAULTS_CACHE.clear()
    # Keyed by the structural query: base documents are content-addressed or fixed, never edited.
    _DEFAULTS_CACHE[key] = defaults
    return defaults


_DEFAULTS_CACHE: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").replace("_", ""))
    except ValueError:
        return None


def drop_slider_defaults(query: Mapping[str, str], defaults: Mapping[str, float]) -> dict[str, str]:
    """The query without slider values equal to their effective default."""
    return {
        k: v for k, v in query.items() if not (k in defaults and _number(v) == defaults[k])
    }


#: A what-if query (its items, sorted) and whether levers were computed.
CacheKey = tuple[tuple[tuple[str, str], ...], bool | None]


class PlanCache:
    """The most recently computed plans, by what-if query: a slider dragged back, a reload or a
    shared link costs no recompute. Thread-safe and bounded; entries are never mutated (base
    documents are immutable under their id, and the code cannot change under a running app)."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._views: OrderedDict[CacheKey, PlanView] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: CacheKey) -> PlanView | None:
        with self._lock:
            view = self._views.get(key)
            if view is not None:
                self._views.move_to_end(key)
            return view

    def put(self, key: CacheKey, view: PlanView) -> None:
        with self._lock:
            self._views[key] = view
            self._views.move_to_end(key)
            while len(self._views) > self.capacity:
                self._views.popitem(last=False)


def plan_view(
    params: Mapping[str, str], bases: BaseStore, levers: bool | None = None, cache: PlanCache | None = None
) -> PlanView:
    """Compute the plan a what-if query describes; raises InputError naming the form key."""
    query = querystring.clean(params)
    key = (tuple(sorted(query.items())), levers)
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        return cached
    base_doc = resolve_base(query, bases)
    defaults = effective_defaults(query, base_doc)
    query = drop_slider_defaults(query, defaults)
    doc = plan_query.plan_from_query(query, base_doc)
    with_levers = _rank_count(doc) <= INLINE_LEVERS_MAX_RANKS if levers is None else levers
    result = plans.run_plan(doc, with_levers=with_levers)
    canonical = canonical_query(query, doc, base_doc)
    view = PlanView(canonical, querystring.page_url("/plan", canonical), doc, base_doc, result, defaults)
    if cache is not None:
        cache.put(key, view)
    return view


def canonical_query(
    query: Mapping[str, str], doc: Mapping[str, Any], base_doc: Mapping[str, Any] | None
) -> dict[str, str]:
    """query_from_plan's canonical query (compared with the base document's own values), plus the base id."""
    canonical = plan_query.query_from_plan(doc, base_doc)
    if "base" in query:
        canonical["base"] = query["base"]
    return canonical


def _rank_count(doc: Mapping[str, Any]) -> int:
    ranks = doc.get("ranks")
    if isinstance(ranks, list):
        return len(ranks)
    gpu = doc.get("gpu")
    count = gpu.get("count") if isinstance(gpu, Mapping) else None
    if isinstance(count, int):
        return count
    layout = doc.get("layout")
    if isinstance(layout, Mapping):
        tp, pp = layout.get("tp", 1), layout.get("pp", 1)
        if isinstance(tp, int) and isinstance(pp, int):
            return tp * pp
    return 1


def plan_json(view: PlanView) -> dict[str, Any]:
    """The JSON twin of the plan page: the result plus the canonical URL."""
    return {**view.result, "url": view.url}

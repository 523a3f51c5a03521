"""The plan page's work between a request and `app.services.plans`: what-if query → canonical plan.

`plan_view` resolves the optional base document, decides the defaults once (the knob table's
fixed ones and vLLM's for the plan, `plan_inputs.engine_defaults`), drops values equal to them (so the
canonical URL stays short although a range input always submits a value), builds and runs the
plan at the layout it opens at (`opening`), and returns the canonical query and URL. Presentation of the
result (KPIs, admission rows, the rank table, form values) lives in `present.py` and its parts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.errors import InputError
from app.core.json_rows import plain_result
from app.services import plan_inputs, plan_query, plans
from app.services.base_documents import BaseStore
from app.services.memo import PlanMemo, memoised, using
from app.services.plan_terms import PlanTerms
from app.services.prepared import PureCache
from app.web import querystring
from app.web.plan import opening

#: Plans with more ranks than this compute their levers in a follow-up request.
INLINE_LEVERS_MAX_RANKS = 64


@dataclass(frozen=True)
class PlanView:
    query: dict[str, str]
    url: str
    doc: dict[str, Any]
    base_doc: dict[str, Any] | None
    result: dict[str, Any]
    defaults: dict[str, str]
    #: Why the plan opened at the layout it shows, when it chose one (layout_choice).
    layout_note: str | None = None
    #: The levers were computed (an empty list then means none applies, not "still to come").
    levers_done: bool = False


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


def vllm_defaults(
    query: Mapping[str, str],
    base_doc: Mapping[str, Any] | None,
    prepared: PureCache[plan_inputs.Preparation] | None = None,
) -> dict[str, str]:
    """What the range inputs would hold if the query did not set them: the defaults of the plan
    its structural keys describe (`plan_inputs.engine_defaults`, no plan is run); {} if it is invalid."""
    structure = plan_query.structural(query)
    if base_doc is None:
        # A pure function of the structural keys alone: once per app (`app.services.memo`).
        key = tuple(sorted(structure.items()))
        made = memoised(("vllm_defaults", key, opening.pins(structure)),
                        lambda: tuple(_defaults(structure, None).items()))
        return dict(made)
    return _defaults(structure, base_doc, _prepared(prepared, structure, base_doc))


def _defaults(
    structure: Mapping[str, str], base_doc: Mapping[str, Any] | None, prepared: plan_inputs.Prepared | None = None
) -> dict[str, str]:
    try:
        values = plan_inputs.engine_defaults(plan_query.plan_from_query(structure, base_doc), prepared)
    except InputError:
        return {}
    return plan_query.vllm_defaults(values)


#: A what-if query (its items, sorted) and whether levers were computed.
CacheKey = tuple[tuple[tuple[str, str], ...], bool | None]


class PlanCache:
    """The most recently computed plans, by what-if query: a slider dragged back, a reload or a
    shared link costs no recompute. Thread-safe and bounded by entries and by the ranks their
    results hold (so a few 16,384-rank plans cannot hold gigabytes); entries are never mutated
    (base documents are immutable under their id, and the code cannot change under a running app)."""

    def __init__(self, capacity: int = 256, max_ranks: int = 65_536) -> None:
        self.capacity = capacity
        self.max_ranks = max_ranks
        self._views: OrderedDict[CacheKey, tuple[PlanView, int]] = OrderedDict()
        self._ranks = 0
        self._lock = threading.Lock()
        #: Validated base documents and their built plans, so a tick only applies the what-if.
        self.prepared: PureCache[plan_inputs.Preparation] = PureCache()
        #: A plan without a base: the terms of its input a slider tick does not change.
        self.terms = PlanTerms()
        #: The pure sub-results of every plan this app computes (`app.services.memo`).
        self.memo = PlanMemo()

    def get(self, key: CacheKey) -> PlanView | None:
        with self._lock:
            found = self._views.get(key)
            if found is None:
                return None
            self._views.move_to_end(key)
            return found[0]

    def put(self, key: CacheKey, view: PlanView) -> None:
        ranks = len(view.result.get("ranks") or ()) + 1
        if ranks > self.max_ranks:
            return
        with self._lock:
            old = self._views.pop(key, None)
            self._ranks += ranks - (old[1] if old else 0)
            self._views[key] = (view, ranks)
            while len(self._views) > self.capacity or self._ranks > self.max_ranks:
                _, (_, dropped) = self._views.popitem(last=False)
                self._ranks -= dropped


def plan_view(
    params: Mapping[str, str], bases: BaseStore, levers: bool | None = None, cache: PlanCache | None = None,
    cleaned: bool = False,
) -> PlanView:
    """Compute the plan a what-if query describes; raises InputError naming the form key. With
    `cache`, under its memo (the app's: `app.services.memo`); `cleaned`: `params` is already
    `querystring.clean`'s output (a route that parsed the query once)."""
    query = dict(params) if cleaned else querystring.clean(params)
    key = (tuple(sorted(query.items())), levers)
    if cache is None:
        return _plan_view(query, bases, levers)
    cached = cache.get(key)
    if cached is not None:
        return cached
    with using(cache.memo):
        view = _plan_view(query, bases, levers, cache)
    cache.put(key, view)
    return view


def _plan_view(
    query: dict[str, str], bases: BaseStore, levers: bool | None, cache: PlanCache | None = None
) -> PlanView:
    base_doc = resolve_base(query, bases)
    prepared = cache.prepared if cache is not None else None
    defaults = vllm_defaults(query, base_doc, prepared)  # the one defaults rule, once per request
    query = plan_query.drop_defaults(query, defaults)
    terms = cache.terms if cache is not None and base_doc is None else None
    reuse = _prepared(prepared, query, base_doc)

    def run(doc: dict[str, Any]) -> dict[str, Any]:
        with_levers = _rank_count(doc) <= INLINE_LEVERS_MAX_RANKS if levers is None else levers
        return plans.run_plan(doc, with_levers=with_levers, prepared=reuse, terms=terms,
                              lazy_rows=cache is not None)  # the app's views: rows made as a page reads them

    opened = opening.open_plan(query, base_doc, run)
    doc, note, result = opened.doc, opened.note, opened.result
    assert result is not None  # a runner was given
    canonical = canonical_query(query, doc, base_doc, defaults)
    if base_doc is None:  # the opening layout stays implicit; a given TP/PP stays given
        opening.layout_in_url(canonical, query, opened.known)
    levers_done = _rank_count(doc) <= INLINE_LEVERS_MAX_RANKS if levers is None else levers
    return PlanView(canonical, querystring.page_url("/plan", canonical), doc, base_doc, result, defaults, note,
                    levers_done)


def _prepared(
    cache: PureCache[plan_inputs.Preparation] | None, query: Mapping[str, str], base_doc: Mapping[str, Any] | None
) -> plan_inputs.Prepared | None:
    """The reuse key of a what-if on a stored base: its content id and the query's values that
    are not what-if knobs (those alone decide the document without its `whatif` section)."""
    if cache is None or base_doc is None or "base" not in query:
        return None
    whatif = plan_query.whatif_keys(base_doc)
    rest = tuple(sorted((k, v) for k, v in query.items() if k not in whatif))
    return plan_inputs.Prepared(cache, rest)


def canonical_query(
    query: Mapping[str, str],
    doc: Mapping[str, Any],
    base_doc: Mapping[str, Any] | None,
    defaults: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """query_from_plan's canonical query (compared with the base document's own values), plus the base id."""
    canonical = plan_query.query_from_plan(doc, base_doc, defaults)
    for key in ("base", querystring.FROM_KEY):
        if key in query:
            canonical[key] = query[key]
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
    """The JSON twin of the plan page: the result (every row made) plus the canonical URL."""
    return {**plain_result(view.result), "url": view.url}

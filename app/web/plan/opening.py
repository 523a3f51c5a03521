"""The layout a plan page opens at, and the TP/PP its canonical URL states (issue 17 item 5).

A URL without a layout opens at the smallest that starts (`layout_choice.smallest_starting_layout`,
memoised per app as `opening_layout`); one with a TP but no PP at the smallest PP that starts at
that TP (`opening_pp`); one with a PP but no TP at the smallest TP that starts at that PP
(`opening_tp`). A given TP or PP stays in the canonical URL unless it is 1 and the URL without it
opens the same page: the same layout and the same note (`layout_in_url`).

The choices are pure functions of the query's knobs but TP and PP (`_choice_settings`, their memo
key with the catalogue's pins). A slider tick with its TP and PP given runs none of them, and one
with only one of them given runs none where the layout it states starts: its own plan is the first
try of the choice (`open_plan` with the page's runner) and answers the canonical URL's question
(`Known`), so it computes exactly one plan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from app.core.errors import InputError
from app.ingest.catalogue import find_model
from app.services import plan_query
from app.services.layout_choice import (
    LayoutChoice,
    smallest_starting_layout,
    smallest_starting_pp,
    smallest_starting_tp,
)
from app.services.memo import memoised

V = TypeVar("V")

#: Plans already computed at a layout: (tp, pp) → (will_start, the TP degrees vLLM accepts there).
Known = Mapping[tuple[int, int], tuple[bool, Sequence[int]]]


def opening_layout(query: Mapping[str, str]) -> LayoutChoice | None:
    """The layout a plan without a base opens at when TP1 does not start (None: TP1 starts, or
    the ranks are given; not `starts`: none does, and the plan opens at TP1 saying so). It fills
    TP and PP where the URL leaves both out, and stays out of the canonical URL; a TP or PP the URL
    gives is kept in it (TP1 included, `layout_in_url`).

    The layouts are tried on the document the query itself builds (`plan_query.plan_from_query`
    of every knob it states but TP/PP: its max_model_len, util, quant, KV dtype, ...), so the
    choice is the one `plans.run_plan` of the page's own document confirms, not the model's defaults'."""
    settings = _choice_settings(query)
    if settings is None:
        return None
    return memoised(_choice_key("opening_layout", settings),  # once per app (`app.services.memo`)
                    lambda: _on_document(settings, smallest_starting_layout))


def opening_pp(query: Mapping[str, str]) -> LayoutChoice | None:
    """The PP a plan without a base opens at when the URL gives its TP but no PP, and PP1 does not
    start at that TP (`layout_choice.smallest_starting_pp`); None: PP1 starts, or nothing is chosen."""
    return _the_other_degree(query, "tp", "pp", smallest_starting_pp)


def opening_tp(query: Mapping[str, str]) -> LayoutChoice | None:
    """The TP a plan without a base opens at when the URL gives its PP but no TP, and TP1 does not
    start at that PP (`layout_choice.smallest_starting_tp`); None: TP1 starts, or nothing is chosen."""
    return _the_other_degree(query, "pp", "tp", smallest_starting_tp)


def _the_other_degree(
    query: Mapping[str, str], given_key: str, chosen_key: str,
    choose: Callable[[Mapping[str, Any], int], LayoutChoice | None],
) -> LayoutChoice | None:
    """The degree `chosen_key` (TP or PP) a plan opens at when the URL gives only `given_key`:
    `choose(document, given)`, once per app and settings (`app.services.memo`)."""
    settings = _choice_settings(query)
    given = _given_int(query, given_key)
    if settings is None or given is None or chosen_key in query:
        return None
    return memoised(_choice_key(f"opening_{chosen_key}", settings, given),
                    lambda: _on_document(settings, lambda doc: choose(doc, given)))


def _choice_settings(query: Mapping[str, str]) -> dict[str, str] | None:
    """What the opening choices read: the query's knobs but TP and PP; None where no layout is
    chosen (a stored base, given ranks)."""
    if "base" in query:
        return None
    settings = {k: v for k, v in query.items() if k in plan_query.BY_KEY and k not in ("tp", "pp")}
    return None if "ranks" in settings else settings


def _choice_key(kind: str, settings: Mapping[str, str], *more: int) -> tuple[object, ...]:
    return (kind, tuple(sorted(settings.items())), pins(settings), *more)


def _given_int(query: Mapping[str, str], name: str) -> int | None:
    try:
        return int(plan_query.canonical_value(name, query[name])) if name in query else None
    except InputError:
        return None  # the plan reports the bad value


def _on_document(settings: Mapping[str, str], choose: Callable[[dict[str, Any]], V]) -> V | None:
    try:
        doc = plan_query.plan_from_query(settings)
    except InputError:
        return None
    return choose(doc)


def known_plan(result: Mapping[str, Any]) -> Known:
    """A computed plan as `Known`: its layout → (will_start, allowed TP degrees)."""
    layout = result.get("layout") or {}
    return {(layout.get("tp", 1), layout.get("pp", 1)): (bool(result["will_start"]), result.get("allowed_tp") or ())}


def layout_in_url(canonical: dict[str, str], query: Mapping[str, str], known: Known) -> None:
    """The canonical URL's TP and PP, for a plan without a base: a TP or PP the query leaves out
    stays out (the opening layout is implicit); one it gives stays, unless it is 1 and the URL
    without it opens the same page. That is so exactly where the layout the query states (a rank it
    leaves out at 1) starts: then every URL of that layout with or without its 1s opens there with
    no note; where it does not, each opens at its own choice with its own note ("the smallest PP
    that starts at the URL's TP1", "the smallest layout that starts"), or at another layout.
    `known`: plans the caller has computed, which include the stated layout (the page's own plan,
    `open_plan`; the API's result), so no other plan runs; a layout missing from it keeps its 1s."""
    if _choice_settings(query) is None:
        return  # `plan_query.query_from_plan`'s rule: a 1 is the fixed default
    given = {name: plan_query.canonical_value(name, query[name]) for name in ("tp", "pp") if name in query}
    stated = known.get((_given_int(query, "tp") or 1, _given_int(query, "pp") or 1))
    starts = stated is not None and stated[0]
    for name in ("tp", "pp"):
        canonical.pop(name, None)
        if name in given and (given[name] != "1" or not starts):
            canonical[name] = given[name]


def opened_document(query: Mapping[str, str], base_doc: Mapping[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """The plan document a what-if query opens: `plan_query.plan_from_query`, at the opening
    layout where the query states no TP/PP (`opening_layout`, `opening_pp`, `opening_tp`); and the note saying
    so. The plan page and the simulator (`app.web.sim.routes`) both take their document from here."""
    opened = open_plan(query, base_doc)
    return opened.doc, opened.note


@dataclass(frozen=True)
class Opened:
    doc: dict[str, Any]
    note: str | None
    #: `run(doc)` when a runner was given, else None.
    result: dict[str, Any] | None
    #: Every plan `run` computed on the way: (tp, pp) → (will_start, allowed TP degrees).
    known: Known


def open_plan(
    query: Mapping[str, str], base_doc: Mapping[str, Any] | None,
    run: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Opened:
    """`opened_document`, with the caller's plan of it (`run`, the plan page's own runner) when
    given. Where the query gives a TP but no PP (a PP but no TP), that plan at PP1 (TP1) is the
    first try of the choice: when it starts (a slider tick at a layout that starts), it is the
    only plan computed."""
    doc = plan_query.plan_from_query(query, base_doc)
    known: dict[tuple[int, int], tuple[bool, Sequence[int]]] = {}

    def ran(doc: dict[str, Any]) -> dict[str, Any] | None:
        if run is None:
            return None
        result = run(doc)
        known.update(known_plan(result))
        return result

    if base_doc is not None or ("tp" in query and "pp" in query):
        return Opened(doc, None, ran(doc), known)
    if "tp" in query or "pp" in query:
        result = ran(doc)
        if result is not None and result["will_start"]:
            return Opened(doc, None, result, known)
        choice = opening_pp(query) if "tp" in query else opening_tp(query)
        if choice is None:
            return Opened(doc, None, result, known)
    else:
        choice = opening_layout(query)
        if choice is None:
            return Opened(doc, None, ran(doc), known)
    note = _open_at(doc, query, choice)
    return Opened(doc, note, ran(doc), known)


def pins(structure: Mapping[str, str]) -> tuple[str | None, ...]:
    """The config sha256 of the catalogue models a query names: part of every memo key computed
    from it, so a changed catalogue is a new key."""
    model, draft = structure.get("model"), structure.get("spec_model")
    entry, draft_entry = find_model(model) if model else None, find_model(draft) if draft else None
    return entry.sha256 if entry is not None else None, draft_entry.sha256 if draft_entry is not None else None


def _open_at(doc: dict[str, Any], query: Mapping[str, str], choice: LayoutChoice) -> str | None:
    """Put the opening layout's TP/PP where the query leaves them out, and the note saying so:
    both chosen (issue 17 item 5), the PP at the query's TP, or the TP at the query's PP."""
    layout = doc.get("layout") or {}
    for key, value in (("tp", choice.tp), ("pp", choice.pp)):
        if key not in query and choice.starts and layout.get(key, 1) != value:
            doc["layout"] = layout = {**layout, key: value}  # only what differs from the document's own
    doc["notes"] = [*doc.get("notes", []), choice.note]
    return choice.note

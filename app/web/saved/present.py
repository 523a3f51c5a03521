"""Saved plans and deployment history → template contexts and plotly figure dicts.

The saved-plan page reuses the plan page's blocks (KPIs, pool chart, admission, warnings,
flags, levers, rank table) through `present.plan_context`, fed with the *saved* result, so a
shared link looks like the plan it came from. The history chart is a plain figure dict (no
plotly.graph_objects): KV GiB per rank over the ledgers, one line per rank, the binding rank's
tokens on a second axis, and a marker with the reading at every ledger whose evidence changed.
Every label that came from a user (rank labels, evidence) is HTML-escaped for plotly.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request

from app.core.audit import rank_position
from app.core.errors import InputError
from app.db import repository as repo
from app.schemas import validate_plan
from app.services import plan_query, saved_plans
from app.services.base_documents import BaseStore
from app.services.deployments import History, HistoryPoint, min_kv_bytes
from app.web import querystring
from app.web.plan import opening, present
from app.web.plan.charts import FONT, GIB
from app.web.plan.views import PlanView

MAX_RANK_TRACES = 64
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def token_required(request: Request) -> bool:
    return bool(request.app.state.settings.write_token)


def saved_list_context(plans: Sequence[repo.PlanSummary], request: Request) -> dict[str, Any]:
    return {
        "nav": "saved", "plans": list(plans), "form": {"plan": "", "parent": "", "title": ""},
        "error": None, "field_errors": {}, "token_required": token_required(request),
    }


def edit_query(doc: Mapping[str, Any], bases: BaseStore, today: Mapping[str, Any] | None = None) -> dict[str, str]:
    """A what-if query that rebuilds `doc` on the plan page: plain keys when they reproduce the
    document exactly, else the document stored as a base (`base=<content id>`). `today`: the
    document's plan (the saved page's recomputation), which says whether its layout starts."""
    plain = {k: v for k, v in doc.items() if k != "title"}
    try:
        query = plan_query.query_from_plan(plain)
        if validate_plan(plan_query.plan_from_query(query)) == validate_plan(plain):
            return _with_layout(query, plain, today)
    except (InputError, ValueError):
        pass
    return {"base": bases.put(doc)}


def _with_layout(query: dict[str, str], doc: Mapping[str, Any], today: Mapping[str, Any] | None) -> dict[str, str]:
    """State the document's TP and PP as the plan page's canonical URL does (`opening.layout_in_url`):
    a 1 is left out only where the document's layout starts. A URL without TP or PP opens at the
    smallest layout that starts (a saved TP1 plan's edit link opened TP4), one without PP at the
    smallest PP that starts at its TP, one without TP at the smallest TP that starts at its PP.
    Without `today` both are stated."""
    layout = doc.get("layout")
    degrees = layout if isinstance(layout, Mapping) else {}
    stated = {**query, **{name: str(degrees.get(name, 1)) for name in ("tp", "pp")}}
    opening.layout_in_url(query, stated, opening.known_plan(today) if today is not None else {})
    return query


def saved_plan_context(
    opened: saved_plans.OpenedPlan, newer: Sequence[repo.PlanSummary], bases: BaseStore, request: Request
) -> dict[str, Any]:
    record = opened.record
    query = edit_query(record.document, bases, opened.recomputed.result)
    # the what-if names this plan (`from`): its Save makes a new version of it, no address to paste
    edit_url = querystring.page_url("/plan", {**query, querystring.FROM_KEY: record.slug})
    result = record.summary
    view = PlanView(query, edit_url, dict(record.document), bases.get(query["base"]) if "base" in query else None,
                    result, {}, levers_done=True)  # the saved result's levers, as saved
    context = present.plan_context(view)
    context.update(
        nav="saved", record=record, versions=opened.versions, newer=list(newer), recomputed=opened.recomputed,
        edit_url=edit_url, json_url=f"/p/{record.slug}.json", share_path=f"/p/{record.slug}",
        share_url=str(request.base_url).rstrip("/") + f"/p/{record.slug}",
        chart_version=hashlib.sha1(record.slug.encode()).hexdigest()[:10],
        form={"plan": edit_url, "parent": record.slug, "title": f"{record.title} (edited)"[:300]},
        token_required=token_required(request),
    )
    context["exports"] = saved_exports(context.get("exports"), record.slug)
    return context


def saved_exports(exports: Mapping[str, Any] | None, slug: str) -> dict[str, Any] | None:
    """The plan page's deploy exports with every download taken from the *saved* result
    (`/p/{slug}/export/{format}`), not from today's recomputation of the what-if."""
    if not exports:
        return None
    def saved(links: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return [{**link, "url": f"/p/{slug}/export/{link['format']}"} for link in links]

    return {**exports, "links": saved(exports.get("links", [])), "copies": saved(exports.get("copies", []))}


# ---------------------------------------------------------------- deployments and history


def deployments_context(request: Request, records: Sequence[repo.DeploymentRecord] = ()) -> dict[str, Any]:
    return {
        "nav": "deployments", "deployments": list(records), "error": None, "field_errors": {},
        "form": {"slug": "", "name": "", "model": "", "layout": "", "hardware": ""},
        "token_required": token_required(request),
    }


def _point_label(point: HistoryPoint) -> str:
    ledger = point.ledger
    day = (ledger.captured_at or ledger.created_at.date()).isoformat()
    return f"#{ledger.id} · {day}"


def _rank_key(point: HistoryPoint, label: str) -> object:
    """One line per GPU: a rank's (DP, PP, TP) place when its label states one (or it is its
    ledger's one rank), so a vLLM upgrade that renamed the processes (EngineCore_DP0 → EngineCore,
    rank=N → Worker_PP…_TP…) continues the line (`audit.rank_position`); else the label."""
    ranks = point.ledger.ranks
    tp = point.ledger.evidence.get("tp")
    place = rank_position(label, len(ranks) == 1, tp if isinstance(tp, int) and not isinstance(tp, bool) else None)
    return label if place is None else place


def _rank_lines(points: Sequence[HistoryPoint]) -> list[tuple[object, list[str]]]:
    lines: dict[object, list[str]] = {}
    for point in points:
        for row in point.ledger.ranks:
            names = lines.setdefault(_rank_key(point, row.rank), [])
            if row.rank not in names:
                names.append(row.rank)
    return list(lines.items())


def history_figure(points: Sequence[HistoryPoint]) -> dict[str, Any]:
    """KV GiB per rank (one line per rank) and the binding rank's tokens over the ledgers."""
    x = [_point_label(p) for p in points]
    lines = _rank_lines(points)[:MAX_RANK_TRACES]
    traces: list[dict[str, Any]] = []
    for i, (key, labels) in enumerate(lines):
        values: list[float | None] = []
        for point in points:
            row = next((r for r in point.ledger.ranks if _rank_key(point, r.rank) == key), None)
            values.append(row.kv_bytes / GIB if row is not None and row.kv_bytes is not None else None)
        name = html.escape(f"rank {' → '.join(labels)}")
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": name, "x": x, "y": values,
            "line": {"color": PALETTE[i % len(PALETTE)], "width": 2}, "connectgaps": False,
            "hovertemplate": f"{name}: %{{y:.2f}} GiB KV<extra></extra>",
        })
    tokens = [p.min_tokens for p in points]
    if any(t is not None for t in tokens):
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": "tokens (binding rank)", "x": x, "y": tokens,
            "yaxis": "y2", "line": {"color": "#1f2933", "width": 2, "dash": "dot"},
            "hovertemplate": "%{y:,} tokens<extra></extra>",
        })
    marked = [(label, p) for label, p in zip(x, points, strict=True) if p.changes]
    annotations = [
        {
            "x": label, "y": 1, "yref": "paper", "text": _annotation_text(p.changes[0]),
            "hovertext": html.escape(" · ".join(p.changes)), "showarrow": True, "arrowhead": 0,
            "ay": -24 if i % 2 == 0 else -58, "font": {"size": 11, "color": "#9a3412"},
            "bgcolor": "#fff7ed", "bordercolor": "#fdba74",
        }
        for i, (label, p) in enumerate(marked)
    ]
    layout = {
        "height": 420, "margin": {"l": 60, "r": 70, "t": 90, "b": 70},
        "font": {"family": FONT, "size": 12, "color": "#1f2933"},
        "paper_bgcolor": "rgba(0,0,0,0)", "plot_bgcolor": "rgba(0,0,0,0)", "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.22, "x": 0},
        "xaxis": {"type": "category", "title": {"text": "ledger"}, "tickfont": {"size": 10}},
        "yaxis": {"title": {"text": "KV GiB per rank"}, "rangemode": "tozero", "gridcolor": "#eef0f3"},
        "yaxis2": {"title": {"text": "tokens"}, "overlaying": "y", "side": "right", "rangemode": "tozero",
                   "showgrid": False},
        "annotations": annotations,
    }
    return {"data": traces, "layout": layout}


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


INFERRED = re.compile(r" \((?:inferred)[^)]*\)")


def _annotation_text(reading: str) -> str:
    """A reading as a two-line chart label: what changed, then what it means (escaped)."""
    head, _, tail = INFERRED.sub("", reading).partition(": ")
    lines = [_short(head), _short(tail)] if tail else [_short(head)]
    return "<br>".join(html.escape(line) for line in lines)


def history_context(history: History, request: Request) -> dict[str, Any]:
    ledgers = history.ledgers
    return {
        "nav": "deployments", "history": history, "deployment": history.deployment,
        "chart": history_figure(history.points) if history.points else None,
        "changes": [p for p in reversed(history.points) if p.changes],
        "min_tokens": {p.ledger.id: p.min_tokens for p in history.points},
        "min_kv": {ledger.id: min_kv_bytes(ledger) for ledger in ledgers},
        "chart_version": f"{history.deployment.slug}-{history.page}-{ledgers[0].id if ledgers else 0}",
        "diff_a": ledgers[1].slug or "" if len(ledgers) > 1 else "",
        "diff_b": ledgers[0].slug or "" if ledgers else "",
        "error": None, "field_errors": {}, "form": {"note": "", "captured_at": "", "run": ""},
        "token_required": token_required(request), "json_url": f"/d/{history.deployment.slug}.json",
        "export_url": f"/d/{history.deployment.slug}/export.json",
    }

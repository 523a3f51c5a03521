"""Plan results → the plan page's template context (labels, display strings, chosen rows).

No arithmetic on capacities here: every number comes from the result; this module only picks,
labels and formats. It assembles the page from the wing's parts: the form (`form`), the KPIs and
admission panel (`admission_panel`), the charts, the rank table and the tiers card; here are the
not-starting card's levers and the deploy exports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote_plus

from app.core.exports import FORMATS, ExportError, env_of, missing_model, pairs_of, serve_command
from app.core.gpus import PRESETS
from app.services import plan_query
from app.web import querystring
from app.web.plan import charts, opening
from app.web.plan.admission_panel import admission, kpis
from app.web.plan.form import error_form_values, error_slot_keys, form_context, gpu_field_text, size_text
from app.web.plan.rank_table import rank_columns, rank_table
from app.web.plan.tiers import tiers_card
from app.web.plan.views import PlanView
from app.web.size.links import size_link

ERROR_CODES = frozenset(
    {"free_below_requested", "no_kv_memory", "no_memory", "manual_does_not_fit", "max_model_len_does_not_fit"}
)


def page_context(
    query: Mapping[str, str], has_base: bool, result: Mapping[str, Any] | None = None, form: bool = True,
    base_doc: Mapping[str, Any] | None = None, doc: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything the plan template reads; without a result, the page of an invalid input.

    `form=False` leaves out the form's values and options, for the htmx fragment of a slider
    tick, which never renders the form.
    """
    context: dict[str, Any] = {
        "nav": "plan", "result": None, "error": None, "field_errors": {}, "charts": {}, "kpis": [],
        "admission": [], "rank_rows": [], "rank_columns": [], "rank_note": "", "rows_kind": "",
        "base_id": query.get("base"), "json_url": "",
        "form_keys": error_slot_keys(not has_base or _estimated_base(base_doc)),
        "compare_url": "", "sim_url": "", "token_required": False, "chart_version": "",
        "error_codes": ERROR_CODES, "url": "", "levers_url": "", "title_name": "",
    }
    if result is None:
        context["json_url"] = querystring.page_url("/plan.json", query)
        context["title_name"] = _model_name(base_doc)
    else:
        context["title_name"] = _model_name(base_doc) or _unnamed_model(result.get("model"))
    if form:
        values = query if result is not None else {**error_form_values(query, base_doc), "base": query.get("base", "")}
        measured = base_doc is not None and plan_query.whatif_keys(base_doc) != frozenset()
        context.update(form_context(values, result, has_base, doc if doc is not None else base_doc, measured))
    return context


def _model_name(doc: Mapping[str, Any] | None) -> str:
    """The model a document names (its name, else its catalogue slug), for a page without a result."""
    model = doc.get("model") if isinstance(doc, Mapping) else None
    if not isinstance(model, Mapping):
        return ""
    return str(model.get("name") or model.get("catalogue") or "")


def _unnamed_model(model: object) -> str:
    """A title for a model known only by its shape (a pasted config.json without `_name_or_path`),
    rather than "Plan from a stored document"."""
    if not isinstance(model, Mapping) or model.get("name") or model.get("source") != "config":
        return ""
    layers, heads, dim, dtype = (model.get(k) for k in ("layers", "kv_heads", "head_dim", "dtype"))
    return f"config.json model: {layers} layers, {heads} KV heads × {dim}, {dtype}"


def levers_flagged(levers: Sequence[Mapping[str, Any]], base_starts: bool = True) -> bool:
    """Whether any lever would stop a starting plan from starting or bring a new warning (results
    saved before levers carried these keys have neither)."""
    return any((lever.get("will_start") is False and base_starts) or lever.get("caveats") for lever in levers)


def rows_kind(result: Mapping[str, Any]) -> str:
    sources = {s for r in result["ranks"][:64] for s in (r.get("sources") or {}).values()}
    return "estimated" if "estimated" in sources else "measured"


def plan_context(view: PlanView, form: bool = True) -> dict[str, Any]:
    """The plan page context for a computed plan (without the form's when `form` is False)."""
    result = view.result
    query = view.url.removeprefix("/plan")  # the canonical "?query" (or ""), encoded once by the view
    notable = charts.notable_ranks(result)  # once, for the pool chart and the rank table
    columns = rank_columns(result)  # once, for the rank table and its header
    rows, note = rank_table(result, notable, columns)
    has_base = view.base_doc is not None
    context = page_context(view.query, has_base, result, form, view.base_doc, view.doc)
    url_param = quote_plus(view.url)
    context.update(
        result=result, charts=charts.plan_charts(result, notable), kpis=kpis(result), admission=admission(result),
        rank_rows=rows, rank_note=note, rank_columns=tuple(label for _, label in columns),
        rows_kind=rows_kind(result), json_url=f"/plan.json{query}",
        compare_url=f"/compare?a={url_param}&b={url_param}",  # = page_url("/compare", {"a": url, "b": url})
        sim_url=f"/sim{query}",
        chart_version=hashlib.sha1(view.url.encode()).hexdigest()[:10], url=view.url,
        levers_url=f"/plan/levers{query}", levers_done=view.levers_done,
        exports=deploy_exports(result, query), size_link=size_link(result), **serve_text(result),
        start_levers=start_lever_rows(result, view.url), tiers=tiers_card(result),
    )
    context["show_memory"] = not has_base or _estimated_base(view.base_doc)
    context["form_keys"] = error_slot_keys(context["show_memory"])
    context["layout_note"] = view.layout_note
    context["edits_plan"] = view.query.get(querystring.FROM_KEY, "")  # saving makes its new version
    if form and context["show_memory"] and not context["form"]["gpu"]:
        context["form"]["gpu"] = gpu_field_text(view.doc)
    return context


_KEY_OF_PATH = {path: knob.key for knob in plan_query.KNOBS for path in (knob.path, *knob.aliases)}
_PRESET_OF_TOTAL = {preset.total_bytes: preset.name for preset in PRESETS}


def _lever_value(key: str, value: Any) -> str:
    """A lever's document value as the plan form's query value (a GPU total by its preset's name)."""
    if key == "gpu" and isinstance(value, int):
        return _PRESET_OF_TOTAL.get(value) or size_text(value)
    if isinstance(value, int) and plan_query.BY_KEY[key].kind == "size":
        return size_text(value)  # the form's size text ("38225MiB"), not a byte count
    return str(value)


def start_lever_rows(result: Mapping[str, Any], url: str) -> list[dict[str, Any]]:
    """The not-starting card's levers: the change, its result and the plan page with it applied."""
    if not result.get("start_levers"):
        return []
    query = querystring.from_text(url) if url else {}
    rows = []
    for lever in result.get("start_levers") or []:
        changed = dict(query)
        for path, value in (lever.get("sets") or {}).items():
            key = _KEY_OF_PATH.get(path)
            if key is None:
                break
            if value is None:
                changed.pop(key, None)
            else:
                changed[key] = _lever_value(key, value)
        else:
            at = _at_lever_layout(changed, result.get("layout") or {}, lever) if url else {}
            rows.append({**lever, "url": querystring.page_url("/plan", at) if url else ""})
            continue
        rows.append({**lever, "url": ""})
    return rows


def _at_lever_layout(changed: dict[str, str], layout: Mapping[str, Any], lever: Mapping[str, Any]) -> dict[str, str]:
    """A lever's query at the layout the lever was computed at: the page's TP and PP where its URL
    leaves them out (a URL without them opens at its own choice: the fp8-weights lever of 70B on L4
    at TP1 said "does not start" and opened TP8, which does), then a 1 left out as the canonical
    URL leaves it out (`opening.layout_in_url`, from the lever's own `will_start`)."""
    stated = dict(changed)
    for name in ("tp", "pp"):
        stated.setdefault(name, str(layout.get(name, 1)))
    try:
        at = (int(stated["tp"]), int(stated["pp"]))
    except ValueError:
        return changed
    out = dict(changed)
    opening.layout_in_url(out, stated, {at: (bool(lever.get("will_start")), ())})
    return out


EXPORT_LABELS = {
    "serve": "vllm serve (shell)", "vllm-config": "vLLM --config YAML", "kserve": "KServe InferenceService",
    "production-stack": "production-stack Helm values", "llm-d": "llm-d model-service values",
    "csv": "per-rank ledger (CSV)",
}
#: Formats with a copy block on the plan page ("Deploy with" shows the serve command already).
COPY_FORMATS = ("vllm-config", "kserve", "production-stack", "llm-d")


def deploy_exports(result: Mapping[str, Any], query: str) -> dict[str, Any]:
    """Download links for every deploy format and the copy blocks, by URL only: a copy block loads
    its text from the same download route when it is opened, so a slider tick writes no file."""
    links = [{"format": f, "label": EXPORT_LABELS[f], "url": f"/plan/export/{f}{query}"} for f in FORMATS]
    why = missing_model(result)
    if why is not None:
        return {"links": [link for link in links if link["format"] == "csv"], "copies": [], "why": why}
    return {"links": links, "copies": [link for link in links if link["format"] in COPY_FORMATS], "why": None}


def serve_text(result: Mapping[str, Any]) -> dict[str, str]:
    """"Deploy with": the `vllm serve MODEL …` command a user can paste (every word shell-quoted);
    a plan that names no model gets MODEL in its place and a note saying so."""
    pairs = pairs_of(result)
    try:
        return {"serve_text": serve_command(pairs, env_of(result)).rstrip("\n"), "serve_note": ""}
    except ExportError:
        text = serve_command([("--model", "MODEL"), *pairs], env_of(result)).rstrip("\n")
        label = (result.get("model") or {}).get("name")
        why = (f"“{label}” is this plan's label, not a model vLLM can load" if label
               else "The plan does not know the model's name")
        return {"serve_text": text, "serve_note": f"{why}: MODEL is a placeholder; put the model's Hugging Face "
                "id or local path in its place."}


def _estimated_base(base_doc: Mapping[str, Any] | None) -> bool:
    return base_doc is not None and not base_doc.get("ranks") and base_doc.get("gpu") is not None

"""Plan results → the plan page's template context (labels, display strings, chosen rows).

No arithmetic on capacities here: every number comes from the result; this module only picks,
labels and formats. The form context is built from the raw query too, so that a page whose
input is invalid still shows the form with the error next to the field.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from app.core import admission as core_admission
from app.core import encoder_cache, kvrank, kvspec, speculative
from app.core import ledger as core_ledger
from app.core.exports import FORMATS, ExportError, missing_model, pairs_of, serve_command
from app.core.gpus import PRESETS
from app.core.kvspec import KV_CACHE_DTYPES
from app.core.lora import allowed_ranks
from app.core.speculative import METHODS as SPEC_METHODS
from app.core.versions import parse_version, rules_for
from app.services import model_input, plan_query
from app.web import querystring
from app.web.formatting import gib, intcomma, ratio
from app.web.plan import charts, views
from app.web.plan.rank_table import rank_columns, rank_count, rank_table
from app.web.plan.tiers import tiers_card
from app.web.plan.views import PlanView
from app.web.size.links import size_link

#: The form's fields: one per knob of the knob table.
FORM_KEYS = tuple(knob.key for knob in plan_query.KNOBS)
#: The form's GPU-memory fields, shown only when no measured base document gives the memory.
MEMORY_KEYS = frozenset({"gpu", "gpu_free", "ranks"})


def error_slot_keys(show_memory: bool) -> tuple[str, ...]:
    """The `#err-KEY` slots the plan form renders: a fragment swaps out-of-band only into these
    (htmx logs a console error for an out-of-band target the page lacks)."""
    return FORM_KEYS if show_memory else tuple(k for k in FORM_KEYS if k not in MEMORY_KEYS)
BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
ERROR_CODES = frozenset(
    {"free_below_requested", "no_kv_memory", "no_memory", "manual_does_not_fit", "max_model_len_does_not_fit"}
)
LIMIT_WORDS = {
    "kv_blocks": "KV blocks (memory)",
    "max_num_seqs": "max_num_seqs",
    "max_model_len": "max_model_len (one request does not fit)",
}


def _size_text(value: object) -> str:
    """Bytes as the short form-field text: "80GiB", "512MiB" or a byte count."""
    if not isinstance(value, int) or isinstance(value, bool):
        return ""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2)):
        if value and value % size == 0:
            return f"{value // size}{unit}"
    return str(value)


@functools.lru_cache(maxsize=1)
def catalogue_options() -> tuple[tuple[str, str], ...]:
    """(slug, name) of every catalogue model (the catalogue is data shipped with the app)."""
    return tuple((m["slug"], m["name"]) for m in model_input.catalogue_search("", limit=500))


def model_options(current: str, with_base: bool) -> list[tuple[str, str]]:
    """(slug, label) for the model select; a blank first entry when a base document sets the model."""
    options = list(catalogue_options())
    if current and all(slug != current for slug, _ in options):
        options.insert(0, (current, current))
    return ([("", "— the base document's model —")] if with_base else []) + options


def form_context(query: Mapping[str, str], result: Mapping[str, Any] | None, has_base: bool) -> dict[str, Any]:
    """The form's values, options and placeholders (from the result when there is one)."""
    form = {key: query.get(key, "") for key in FORM_KEYS}
    form["base"], form["from"] = query.get("base", ""), query.get(querystring.FROM_KEY, "")
    placeholders: dict[str, str] = {}
    tp_options = [1, 2, 4, 8]
    if result is not None:
        engine, layout, policy = result["engine"], result["layout"], result["policy"]
        source = str(result["model"].get("source") or "")
        form["model"] = query.get("model") or (source.split(":", 1)[1] if source.startswith("catalogue:") else "")
        form.update(
            tp=str(layout["tp"]), pp=str(layout["pp"]), dp=str(layout["dp"]),
            util=str(engine["gpu_memory_utilization"]), mnbt=str(engine["max_num_batched_tokens"]),
            kv_dtype=engine["kv_cache_dtype"], block_size=str(engine["block_size"]),
            quant=str(engine.get("quantization") or ""),
            growth=str(policy["growth_reserve"]),
        )
        if not form["gpu"] and not has_base:
            form["gpu"] = plan_query.DEFAULT_GPU_NAME
        lora = engine.get("lora") or {}
        form["loras"] = form["loras"] or str(lora.get("max_loras") or "")
        form["lora_rank"] = form["lora_rank"] or str(lora.get("max_lora_rank") or "")
        spec = engine.get("speculative") or {}
        form["spec"] = form["spec"] or str(spec.get("method") or "")
        form["spec_tokens"] = form["spec_tokens"] or str(spec.get("num_speculative_tokens") or "")
        placeholders = {
            "ranks": str(layout["ranks"]), "vllm": str(result["vllm_version"]),
            "max_model_len": str(engine["max_model_len"]), "max_num_seqs": str(engine["max_num_seqs"]),
            "reserve": _size_text(policy["operating_reserve_bytes"]), "live": "not set",
        }
        tp_options = list(result.get("allowed_tp") or tp_options)
    current_tp = int(form["tp"]) if form["tp"].isdigit() else 1
    if current_tp not in tp_options:
        tp_options = sorted({*tp_options, current_tp})
    return {
        "form": form,
        "knobs": plan_query.BY_KEY,
        "placeholders": placeholders,
        "options": {
            "models": model_options(form["model"], has_base),
            "tp": [(str(tp), str(tp)) for tp in tp_options],
            "kv_dtypes": [(d, d) for d in KV_CACHE_DTYPES],
            "block_sizes": [(str(b), str(b)) for b in BLOCK_SIZES],
            "quant": quant_options(result, query),
            "lora_ranks": lora_rank_options(result),
            "spec_methods": [("", "off"), *((m, m) for m in SPEC_METHODS)],
            "spec_models": [("", "— none (mtp, ngram) —"), *catalogue_options()],
            "ep": [("", "off"), ("true", "on (--enable-expert-parallel)")],
            "offload_backend": [("", "native"), ("lmcache", "lmcache")],
            "prefix": [("", "vLLM's default"), ("true", "on"), ("false", "off (--no-enable-prefix-caching)")],
        },
        "show_memory": not has_base,
        "gpu_presets": gpu_options(),
        "reset_url": querystring.page_url("/plan", {k: v for k, v in query.items() if k in ("base", "model")}),
    }


@functools.lru_cache(maxsize=1)
def gpu_options() -> tuple[tuple[str, str], ...]:
    """(name, label) of every GPU preset for the GPU field's list: the total vLLM budgets against."""
    return tuple((p.name, f"{p.total_bytes / 1024**3:.2f} GiB usable (torch's total)") for p in PRESETS)


def lora_rank_options(result: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The max-LoRA-rank select: the ranks the plan's vLLM version accepts (app.core.lora)."""
    version = parse_version(str(result["vllm_version"])) if result is not None else rules_for(None).version
    return [("", "16 (vLLM's default)"), *((str(r), str(r)) for r in allowed_ranks(version))]


def quant_options(result: Mapping[str, Any] | None, query: Mapping[str, str]) -> list[tuple[str, str]]:
    """The weights select: as the checkpoint holds them, or online fp8 for an unquantized one."""
    fp8 = ("fp8", "fp8 (--quantization fp8)")
    if result is None:
        return [("", "as the checkpoint"), fp8]
    model, engine = result["model"], result["engine"]
    if model.get("layers") is None:  # no shape (bytes per token only): weights cannot be resized
        return [("", "as measured")]
    checkpoint = model.get("checkpoint_quantization")
    if checkpoint:
        return [("", f"as the checkpoint ({checkpoint})")]
    if engine.get("quantization") and "quant" not in query:
        return [("", "fp8 (--quantization fp8, as in the run)")]  # the base document's own setting
    return [("", f"as the checkpoint ({model.get('dtype') or 'model dtype'})"), fp8]


def error_form_values(query: Mapping[str, str], base_doc: Mapping[str, Any] | None) -> dict[str, str]:
    """The form of a plan that cannot be computed: the query's values, else the base document's
    own (what was imported or saved), else each knob's default and vLLM's for the plan where they
    can be told: never a slider's midpoint standing for a value nobody set."""
    values = {knob.key: knob.default for knob in plan_query.KNOBS if knob.default is not None}
    if base_doc is not None:
        values.update(views.vllm_defaults(query, base_doc))
        values.update({k: v for k, v in plan_query.query_from_plan(base_doc, None).items() if k in FORM_KEYS})
    return {**values, **{k: v for k, v in query.items() if v != ""}}


def page_context(
    query: Mapping[str, str], has_base: bool, result: Mapping[str, Any] | None = None, form: bool = True,
    base_doc: Mapping[str, Any] | None = None,
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
    if form:
        values = query if result is not None else {**error_form_values(query, base_doc), "base": query.get("base", "")}
        context.update(form_context(values, result, has_base))
    return context


def _model_name(doc: Mapping[str, Any] | None) -> str:
    """The model a document names (its name, else its catalogue slug), for a page without a result."""
    model = doc.get("model") if isinstance(doc, Mapping) else None
    if not isinstance(model, Mapping):
        return ""
    return str(model.get("name") or model.get("catalogue") or "")


def binding_row(result: Mapping[str, Any]) -> Mapping[str, Any]:
    ranks: Sequence[Mapping[str, Any]] = result["ranks"]
    return next((r for r in ranks if r.get("binding")), ranks[0] if ranks else {})


def kpis(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    binding = binding_row(result)
    ceiling = result.get("concurrency_ceiling")
    concurrency_sub = f"limit: {LIMIT_WORDS.get(str(result.get('binding_limit')), result.get('binding_limit'))}"
    fits = bool(result.get("will_start"))
    if not fits:
        return _not_starting_kpis(result)
    return [
        {"key": "tokens", "label": "Tokens (block-rounded)", "value": intcomma(result["tokens"]),
         "sub": f"raw {intcomma(result['raw_tokens'])} · {intcomma(result['blocks'])} blocks"},
        {"key": "kv", "label": "KV on the binding rank", "value": gib(binding.get("kv_bytes")),
         "sub": f"{intcomma(result['kv_bytes_per_token'])} B per token per rank"},
        {"key": "binding", "label": "Binding rank", "value": str(result.get("binding_rank")),
         "sub": f"of {intcomma(rank_count(result))} · stranded {gib(result.get('stranded_bytes'))}"},
        {"key": "concurrency", "label": "Concurrent requests",
         "value": intcomma(result.get("concurrency")) if ceiling is not None else "—",
         "sub": concurrency_sub if ceiling is not None else "set avg live tokens per request"},
        {"key": "starts", "label": "vLLM starts", "value": "yes" if fits else "no", "bad": not fits,
         "sub": "max_model_len fits" if result.get("fits_max_model_len")
         else f"largest max_model_len that fits: {intcomma(result.get('largest_max_model_len'))}"},
    ]


def _not_starting_kpis(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A plan vLLM refuses shows no capacity: the figures a started engine would have are "—"."""
    none = "vLLM will not start: no capacity"
    return [
        {"key": "tokens", "label": "Tokens (block-rounded)", "value": "—", "sub": none},
        {"key": "kv", "label": "KV on the binding rank", "value": "—", "sub": none},
        {"key": "binding", "label": "Binding rank", "value": str(result.get("binding_rank")),
         "sub": f"of {intcomma(len(result['ranks']))}"},
        {"key": "concurrency", "label": "Concurrent requests", "value": "—", "sub": none},
        {"key": "starts", "label": "vLLM starts", "value": "no", "bad": True,
         "sub": "why, and what would make it start: above"},
    ]


def _explain(result: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    entry = (result.get("explain") or {}).get(key)
    return entry if isinstance(entry, Mapping) else None


@dataclass(frozen=True, slots=True)
class AdmissionRow:
    """One admission-panel number (attribute access keeps the template's hot loop cheap)."""

    key: str
    label: str
    value: str
    badge: str | None = None
    note: str | None = None
    explain: Mapping[str, Any] | None = None


def admission(result: Mapping[str, Any]) -> list[AdmissionRow]:
    """The admission panel's rows: label, value, an optional badge and note, and the explain entry."""
    binding = binding_row(result)
    limit = str(result.get("binding_limit"))
    fits = bool(result.get("fits_max_model_len"))
    ceiling = result.get("concurrency_ceiling")

    def row(key: str, label: str, value: str, badge: str | None = None, note: str | None = None) -> AdmissionRow:
        return AdmissionRow(key, label, value, badge, note, _explain(result, key))

    return [
        row("requested_bytes", "Requested budget per rank", gib(binding.get("requested_bytes"))),
        row("kv_bytes", "KV bytes on the binding rank", gib(binding.get("kv_bytes"))),
        row("kv_bytes_per_token", "KV bytes per token, per rank", f"{intcomma(result['kv_bytes_per_token'])} B"),
        row("page_bytes", "Page (one block)", f"{intcomma(result['page_bytes'])} B",
            note=f"block_size {result['block_size']} × per-token bytes of every KV layer on the rank."),
        row("blocks", "Blocks (minimum over ranks)", intcomma(result["blocks"])),
        row("tokens", "Token positions, block-rounded", intcomma(result["tokens"])),
        row("raw_tokens", "Raw token positions", intcomma(result["raw_tokens"]),
            note="KV bytes / per-token bytes on the binding rank, before rounding down to whole blocks."),
        row("schedulable_tokens", "Schedulable tokens", intcomma(result["schedulable_tokens"])),
        row("concurrency_ceiling", "Concurrency ceiling (memory)", intcomma(ceiling),
            note=None if ceiling is not None else "Set the average live tokens per request to get a ceiling."),
        row("binding_limit", "Limit that binds first", LIMIT_WORDS.get(limit, limit),
            note=f"KV blocks, max_num_seqs ({intcomma(result.get('max_num_seqs'))}) and max_model_len are three "
            "separate limits; this one is reached first."),
        row("binding_rank", "Binding rank", str(result.get("binding_rank")),
            note=result.get("binding_reason") or "The rank with the fewest KV blocks sets every rank's count."),
        row("max_concurrency_at_max_model_len", "vLLM max concurrency at max_model_len",
            f"{ratio(result.get('max_concurrency_at_max_model_len'), 2)}×", badge="derived"),
        row("vllm_kv_cache_size_tokens", "vLLM \u201cGPU KV cache size\u201d",
            f"{intcomma(result['vllm_kv_cache_size_tokens'])} tokens", badge="derived"),
        row("fits_max_model_len", "One max_model_len request fits", "yes" if fits else "no",
            badge=None if fits else "bad",
            note=f"Largest max_model_len that fits: {intcomma(result.get('largest_max_model_len'))} tokens."),
        row("stranded_bytes", "Stranded KV, all ranks", gib(result.get("stranded_bytes")),
            note="Bytes on the other ranks beyond the binding rank's blocks: they cannot hold whole tokens."),
        *_extra_rows(result, row),
    ]


def _extra_rows(result: Mapping[str, Any], row: Callable[..., AdmissionRow]) -> list[AdmissionRow]:
    """Issue 15's rows where the plan has them: the encoder cache, the draft's bytes per token."""
    out = []
    cache = result.get("encoder_cache")
    if cache:
        out.append(row("encoder_cache_bytes", "Encoder cache (in the activation peak)", gib(cache["cache_bytes"]),
                       note=f"{intcomma(cache['encoder_cache_size_tokens'])}-token budget, "
                       f"{cache['items_profiled']} item(s) of {intcomma(cache['max_tokens_per_item'])} tokens "
                       "profiled; the prefill chunk (mnbt) moves it."))  # fmt: skip
    if result.get("draft_kv_bytes_per_token"):
        spec = result["engine"]["speculative"]
        out.append(row("draft_kv_bytes_per_token", "Draft's KV bytes per token",
                       f"{intcomma(result['draft_kv_bytes_per_token'])} B",
                       note=f"{spec['method']}: part of the KV bytes per token; each running request also reserves "
                       f"{spec['lookahead_tokens_per_request']} lookahead slots."))  # fmt: skip
    return out


#: Where each admission-panel number is computed: the page's `adm-<key>` (block `results`, from
#: `admission()` above) → this key → the core function. tests/web/test_explain_panel.py traces a
#: page render and checks that each function runs and, for the pure ones, gives the number shown.
COMPUTED_BY: dict[str, Callable[..., object]] = {
    "requested_bytes": core_ledger.work_out_rank,
    "kv_bytes": core_ledger.work_out_rank,
    "kv_bytes_per_token": kvspec.rank_kv,
    "page_bytes": kvspec.rank_kv,
    "blocks": core_admission.admit,
    "tokens": core_admission.admit,
    "raw_tokens": kvrank.RankKV.raw_tokens,
    "schedulable_tokens": core_admission.schedulable,
    "concurrency_ceiling": core_admission.admit,
    "binding_limit": core_admission.admit,
    "binding_rank": core_admission.admit,
    "max_concurrency_at_max_model_len": core_admission.admit,
    "vllm_kv_cache_size_tokens": core_admission.admit,
    "fits_max_model_len": core_admission.admit,
    "stranded_bytes": core_admission.admit,
    "encoder_cache_bytes": encoder_cache.encoder_cache_terms,
    "draft_kv_bytes_per_token": speculative.draft_kv_bytes_per_token,
}


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
    rows, note = rank_table(result)
    has_base = view.base_doc is not None
    context = page_context(view.query, has_base, result, form)
    url_param = quote_plus(view.url)
    context.update(
        result=result, charts=charts.plan_charts(result), kpis=kpis(result), admission=admission(result),
        rank_rows=rows, rank_note=note, rank_columns=tuple(label for _, label in rank_columns(result)),
        rows_kind=rows_kind(result), json_url=f"/plan.json{query}",
        compare_url=f"/compare?a={url_param}&b={url_param}",  # = page_url("/compare", {"a": url, "b": url})
        sim_url=f"/sim{query}",
        chart_version=hashlib.sha1(view.url.encode()).hexdigest()[:10], url=view.url,
        levers_url=f"/plan/levers{query}",
        exports=deploy_exports(result, query), size_link=size_link(result), **serve_text(result),
        start_levers=start_lever_rows(result, view.url), tiers=tiers_card(result),
    )
    context["show_memory"] = not has_base or _estimated_base(view.base_doc)
    context["form_keys"] = error_slot_keys(context["show_memory"])
    context["layout_note"] = view.layout_note
    if form and context["show_memory"] and not context["form"]["gpu"]:
        context["form"]["gpu"] = _gpu_field_text(view.doc)
    return context


_KEY_OF_PATH = {path: knob.key for knob in plan_query.KNOBS for path in (knob.path, *knob.aliases)}
_PRESET_OF_TOTAL = {preset.total_bytes: preset.name for preset in PRESETS}


def _lever_value(key: str, value: Any) -> str:
    """A lever's document value as the plan form's query value (a GPU total by its preset's name)."""
    if key == "gpu" and isinstance(value, int):
        return _PRESET_OF_TOTAL.get(value) or _size_text(value)
    return str(value)


def start_lever_rows(result: Mapping[str, Any], url: str) -> list[dict[str, Any]]:
    """The not-starting card's levers: the change, its result and the plan page with it applied."""
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
            rows.append({**lever, "url": querystring.page_url("/plan", changed) if url else ""})
            continue
        rows.append({**lever, "url": ""})
    return rows


def _gpu_field_text(doc: Mapping[str, Any]) -> str:
    """The GPU field's text for a document: its preset's name, else its total as a short size."""
    gpu = doc.get("gpu")
    if not isinstance(gpu, Mapping):
        return ""
    if isinstance(gpu.get("name"), str):
        return str(gpu["name"])
    total = gpu.get("total")
    return total if isinstance(total, str) else _size_text(total)


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
        return {"serve_text": serve_command(pairs).rstrip("\n"), "serve_note": ""}
    except ExportError:
        text = serve_command([("--model", "MODEL"), *pairs]).rstrip("\n")
        label = (result.get("model") or {}).get("name")
        why = (f"“{label}” is this plan's label, not a model vLLM can load" if label
               else "The plan does not know the model's name")
        return {"serve_text": text, "serve_note": f"{why}: MODEL is a placeholder; put the model's Hugging Face "
                "id or local path in its place."}


def _estimated_base(base_doc: Mapping[str, Any] | None) -> bool:
    return base_doc is not None and not base_doc.get("ranks") and base_doc.get("gpu") is not None

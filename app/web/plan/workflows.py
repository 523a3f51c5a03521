"""Home, import and compare: turn form input into planning calls and template contexts.

Pasted or uploaded text is size-checked and decoded here; imported logs, config.json files and
nvidia-smi output become base plan documents in the base store, reached by `/plan?base=<id>`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import UploadFile

from app.core.errors import InputError
from app.db.repository import NotFound
from app.ingest.catalogue import get_model
from app.services import imported_runs, imports, model_input, plan_query, plans
from app.services.base_documents import BaseStore
from app.settings import Settings
from app.web import querystring
from app.web.plan import examples
from app.web.plan.form import GPU_OPTIONS
from app.web.plan.views import plan_view

LOG_ROW_KEYS = (
    ("total_bytes", "total"), ("free_at_start_bytes", "free at start"), ("weights_bytes", "weights"),
    ("non_torch_bytes", "non-torch"), ("activation_bytes", "activation"), ("cuda_graph_bytes", "CUDA graphs"),
    ("kv_bytes", "KV"),
)


def _mib(limit: int) -> str:
    return f"{limit / 1024 / 1024:g}"


def home_context(settings: Settings, q: str, active_form: str = "") -> dict[str, Any]:
    models = model_input.catalogue_search(q, limit=12 if not q.strip() else 30)
    return {
        "nav": "home", "q": q, "active_form": active_form, "error": None, "field_errors": {},
        "models": [{**m, "url": querystring.page_url("/plan", {"model": m["slug"]})} for m in models],
        "examples": examples.EXAMPLES if settings.demo_data else (),
        "model_options": [(m["slug"], m["name"]) for m in model_input.catalogue_search("", limit=200)],
        "default_model": "llama-3.1-70b", "max_log_mib": _mib(settings.max_log_bytes), "recent": [],
        "default_gpu": plan_query.DEFAULT_GPU_NAME, "gpu_presets": GPU_OPTIONS,
    }


def home_json(q: str) -> dict[str, Any]:
    return {
        "models": model_input.catalogue_search(q, limit=30),
        "examples": [{"title": e.title, "description": e.description, "url": e.url} for e in examples.EXAMPLES],
    }


def upload_text(text: str, file: UploadFile | None, limit: int, field: str) -> str:
    """The pasted text, or the uploaded file's text (UTF-8, undecodable bytes replaced)."""
    if file is not None and file.filename:
        data = file.file.read(limit + 1)
        if len(data) > limit:
            raise InputError(field, f"the file is larger than {_mib(limit)} MiB")
        return data.decode("utf-8", errors="replace")
    if len(text.encode()) > limit:
        raise InputError(field, f"the text is larger than {_mib(limit)} MiB")
    return text


def log_text(text: str, file: UploadFile | None, limit: int) -> str:
    content = upload_text(text, file, limit, "log")
    if not content.strip():
        raise InputError("log", "paste a vLLM startup log or choose a log file")
    return content


def base_plan_url(doc: Mapping[str, Any], bases: BaseStore) -> str:
    return querystring.page_url("/plan", {"base": bases.put(doc)})


#: Why a run's plan has no link: the import's plans together pass one client's allowance.
PLANS_PAST_ALLOWANCE = ("this log has more runs' plans than the server keeps for one client at a time; "
                        "import the start-ups you need on their own for a link to this one")


def _scalars(section: object) -> dict[str, object]:
    """The stated scalar fields of a parsed-log section (evidence and tolerances left out)."""
    if not isinstance(section, Mapping):
        return {}
    return {k: v for k, v in section.items() if isinstance(v, str | int | float)}


def _inferred(version: Mapping[str, Any]) -> str:
    """The version range the log's lines imply, in words: "inferred 0.9.1 – <0.10.0", "inferred 0.9.1
    or later", "inferred before 0.8.0" (not "0.9.1 – <?" when one bound is open)."""
    low, high = version.get("inferred_min"), version.get("inferred_max_exclusive")
    if low and high:
        return f"inferred {low} – <{high}"
    if low or high:
        return f"inferred {low} or later" if low else f"inferred before {high}"
    return "no version inferred"


def run_display(index: int, run: Mapping[str, Any]) -> dict[str, Any]:
    """One parsed run's display pieces on the import page (its plan link is added by the server)."""
    version = run.get("version") or {}
    stated = run.get("vllm_version")
    return {"index": index, "run": run, "version_text": stated or f"not stated ({_inferred(version)})",
            "settings": _scalars(run.get("settings")), "engine": _scalars(run.get("engine"))}


#: The largest uploaded log put back into the import page's text box (bigger ones stay in the file field).
KEEP_IN_BOX_BYTES = 1024 * 1024
#: The longest model name an import takes (catalogue slugs and HF ids are far shorter; a draft
#: model's name in a plan document has the same bound, `schemas.DraftModelDoc`).
MAX_MODEL_NAME = 300


def import_context(
    settings: Settings, active_form: str = "", model_slug: str = "", log_text: str = "", config_text: str = ""
) -> dict[str, Any]:
    """The import page; after an import (or a refused one) the pasted log and config stay in their boxes."""
    return {"nav": "import", "active_form": active_form, "error": None, "field_errors": {}, "runs": None,
            "row_keys": LOG_ROW_KEYS, "max_log_mib": _mib(settings.max_log_bytes), "findings": [],
            "model_slug": model_slug, "layout": {}, "config_text": config_text,
            "log_text": log_text if len(log_text.encode()) <= KEEP_IN_BOX_BYTES else "",
            "model_options": [(m["slug"], m["name"]) for m in model_input.catalogue_search("", limit=200)]}


def import_form_json(settings: Settings) -> dict[str, Any]:
    """The import page's JSON twin: what the form takes and where to post it."""
    return {
        "post_url": "/import.json",
        "api_url": "/api/v1/import/log",
        "fields": {
            "text": "vLLM startup log text (every rank's lines; any prefix era)",
            "file": "or the log as a file upload (multipart)",
            "model": "optional catalogue slug: residuals and every run's plan use that model",
            "config": "optional config.json text of a model not in the catalogue (used like model)",
            "tp": "optional TP degree (1-4096), for a log that does not state it",
            "pp": "optional PP degree (pipeline stages, 1-1024), for a log that does not state it",
        },
        "max_log_bytes": settings.max_log_bytes,
        "row_keys": [key for key, _ in LOG_ROW_KEYS],
        "models": [{"slug": m["slug"], "name": m["name"]} for m in model_input.catalogue_search("", limit=200)],
    }


def catalogue_config(slug: str) -> dict[str, object] | None:
    """The config.json of a catalogue model, or None for no slug."""
    if not slug:
        return None
    if len(slug) > MAX_MODEL_NAME:  # a 1 MB name beside a log spent the import's 30 s of CPU in the lookup
        raise InputError("model", f"no catalogue model is named with more than {MAX_MODEL_NAME} characters "
                                  f"(got {len(slug):,})")
    try:
        return get_model(slug).config_dict()
    except KeyError:
        raise InputError("model", f"no catalogue model {slug[:120]!r}") from None


def import_layout(tp: str, pp: str) -> dict[str, int]:
    """The TP/PP degrees typed on the import page (for a log that does not state its layout)."""
    out: dict[str, int] = {}
    for key, text, top in (("tp", tp, 4096), ("pp", pp, 1024)):
        text = text.strip()
        if not text:
            continue
        if not (text.isascii() and text.isdigit() and len(text) <= 5 and 1 <= int(text) <= top):
            raise InputError(key, f"{key.upper()} must be a whole number from 1 to {top}, got {text[:20]!r}")
        out[key] = int(text)
    return out


def read_import(
    text: str, model_slug: str, layout: Mapping[str, int] | None = None, config_text: str = ""
) -> tuple[dict[str, Any], list[tuple[dict[str, Any] | None, str | None]]]:
    """Parse a log (with the chosen catalogue model, or a pasted config.json, for residuals and
    every run's plan) and make each run's plan document (`imports.read_log`). Pure: the web runs
    it in the import child (`import_job`, under web/isolation.py's limits)."""
    config = catalogue_config(model_slug)
    model = imported_runs.model_doc(model_slug, config_text)
    if config is None and model is not None:
        config = model["config"]
    return imports.read_log(text, config, dict(layout or {}) or None, model)


def _json_object(content: str, field: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(content)
    except json.JSONDecodeError as exc:
        raise InputError(field, f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(value, dict):
        raise InputError(field, f"a {what} must be a JSON object")
    return value


@dataclass(frozen=True)
class ConfigUpload:
    """The config form: config.json and, optionally, model.safetensors.index.json (pasted or uploaded)."""

    config: str
    file: UploadFile | None
    index: str = ""
    index_file: UploadFile | None = None


def config_document(upload: ConfigUpload, gpu: str, name: str, limit: int) -> dict[str, Any]:
    """A plan document for a pasted or uploaded config.json on the given GPU (a preset or a size);
    with a checkpoint index, its metadata.total_size sizes the weights exactly."""
    config = _json_object(upload_text(upload.config, upload.file, limit, "config"), "config", "config.json")
    model: dict[str, Any] = {"config": config}
    index_text = upload_text(upload.index, upload.index_file, limit, "model.safetensors_index")
    if index_text.strip():
        model["safetensors_index"] = _json_object(index_text, "model.safetensors_index",
                                                  "model.safetensors.index.json")
    if name.strip():
        model["name"] = name.strip()[:120]
    doc = {"model": model, "gpu": plan_query.gpu_section(gpu)}
    plans.run_plan(doc, with_levers=False)  # validate now: errors show on the form, not later
    return doc


def nvidia_smi_document(text: str, model: str) -> dict[str, Any]:
    """A plan on the GPUs nvidia-smi lists: each GPU's measured total and free memory, the other
    rows estimated from the model (one TP group over all GPUs when the model allows that degree).
    """
    if not text.strip():
        raise InputError("nvidia_smi", "paste the output of nvidia-smi")
    parsed = imports.import_nvidia_smi(text)
    gpus = [g for g in parsed.get("gpus") or [] if isinstance(g, Mapping) and isinstance(g.get("total_bytes"), int)]
    if not gpus:
        raise InputError("nvidia_smi", "no GPU with its total memory was found in that text")
    ranks: list[dict[str, Any]] = []
    for i, g in enumerate(gpus):
        # vLLM's budget is against torch's total (the card's preset), not nvidia-smi's memory.total
        total = g.get("vllm_total_bytes") or g["total_bytes"]
        rank: dict[str, Any] = {"label": f"GPU{g.get('index', i)}", "total": total}
        if isinstance(g.get("free_at_start_bytes"), int):  # the same gap below nvidia-smi's free
            rank["free_at_start"] = max(0, g["free_at_start_bytes"] - (g["total_bytes"] - total))
        ranks.append(rank)
    doc: dict[str, Any] = {"model": {"catalogue": model or "llama-3.1-8b"}, "ranks": ranks,
                           "notes": smi_total_notes(gpus)}
    probe = {"model": doc["model"], "gpu": {"total": gpus[0]["total_bytes"]}}
    if len(gpus) in plans.allowed_tp(probe):
        doc["layout"] = {"tp": len(gpus)}
    plans.run_plan(doc, with_levers=False)  # validate now: errors show on the form
    return doc


def smi_total_notes(gpus: list[Mapping[str, Any]]) -> list[str]:
    """What the import did with each card's total, one line per distinct card: mapped to its preset
    (torch's total, which vLLM budgets against) or, for a card no preset knows, nvidia-smi's own total."""
    out: dict[str, list[str]] = {}
    for i, g in enumerate(gpus):
        gib = g["total_bytes"] / 2**30
        if g.get("preset"):
            line = (f"{g.get('name')}: the {g['preset']} preset's total, {g['vllm_total_bytes'] / 2**30:.2f} GiB "
                    f"(torch's total, which vLLM budgets against; nvidia-smi says {gib:.2f} GiB)")
        else:
            line = (f"{g.get('name') or 'GPU'}: no preset matches; nvidia-smi's total {gib:.2f} GiB taken, "
                    "about 0.45 GiB above torch's (vLLM's budget may be that much smaller)")
        out.setdefault(line, []).append(str(g.get("index", i)))
    return [f"GPU {', '.join(idx)} — {line}" for line, idx in out.items()]


#: A saved-plan link: absolute or relative `/p/<slug>`, its `.json` twin, or the API's `/api/v1/plans/<slug>`.
_SAVED_LINK = re.compile(r"^(?:https?://[^/\s]+)?/(?:p|api/v1/plans)/([A-Za-z0-9_-]{1,64})(?:\.json)?/?(?:[?#].*)?$")
_BARE_SLUG = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PLAN_PATH = re.compile(r"^(?:https?://[^/\s]+)?/plan/?(?:[?#].*)?$")
SavedLoader = Callable[[str], Mapping[str, Any]]
_HELP = "give a plan URL (/plan?…), its query string, a saved-plan link (/p/…) or a saved plan's slug"


def _side(text: str, bases: BaseStore, side: str, load_saved: SavedLoader) -> dict[str, Any]:
    """One side of a comparison: a saved plan as it was saved, or the result of a plan URL or query
    string with its canonical URL. Anything else is an InputError naming the side's field."""
    text = text.strip()
    link = _SAVED_LINK.match(text) or _BARE_SLUG.match(text)
    if link is not None:
        slug = link[1] if link.re is _SAVED_LINK else link[0]
        try:
            return dict(load_saved(slug))
        except NotFound:
            raise InputError(side, f"no saved plan {slug!r}: {_HELP}") from None
    query = querystring.from_text(text)
    if not query and not _PLAN_PATH.match(text):
        raise InputError(side, f"{text[:80]!r} is not a plan: {_HELP}")
    try:
        view = plan_view(query, bases, levers=False)
    except InputError as exc:
        raise exc.under(side) from None
    return {**view.result, "url": view.url}


def compare_form_context(a: str, b: str) -> dict[str, Any]:
    return {"nav": "compare", "a": a, "b": b, "error": None, "field_errors": {}, "comparison": None,
            "side_a": None, "side_b": None}


def compare_context(a: str, b: str, bases: BaseStore, load_saved: SavedLoader) -> dict[str, Any]:
    if not a.strip() or not b.strip():
        return {}
    result_a, result_b = _side(a, bases, "a", load_saved), _side(b, bases, "b", load_saved)
    comparison = plans.compare(result_a, result_b)
    return {"comparison": comparison, "side_a": result_a, "side_b": result_b,
            "rank_groups": rank_groups(comparison["ranks"])}


def rank_groups(ranks: list[Mapping[str, Any]], shown: int = 64) -> list[dict[str, Any]]:
    """The compare page's per-rank table: ranks whose every row is the same (A, B and delta) as
    one group, each group's rows split into those that changed and those that did not."""
    groups: dict[str, dict[str, Any]] = {}
    for rank in ranks:
        rows: Mapping[str, Mapping[str, Any]] = rank["rows"]
        key = json.dumps(rows, sort_keys=True, default=str)
        group = groups.get(key)
        if group is None:
            if len(groups) >= shown:
                continue
            changed = {k: r for k, r in rows.items() if r["a"] != r["b"]}
            unchanged = {k: r for k, r in rows.items() if r["a"] == r["b"]}
            group = groups[key] = {"labels": [], "changed": changed, "unchanged": unchanged}
        group["labels"].append(str(rank["rank"]))
    out = list(groups.values())
    for group in out:
        labels = group["labels"]
        group["title"] = labels[0] if len(labels) == 1 else (
            f"{', '.join(labels[:3])}{', …' if len(labels) > 3 else ''} ({len(labels)} ranks, the same rows)"
        )
    return out


def compare_json(a: str, b: str, bases: BaseStore, load_saved: SavedLoader) -> dict[str, Any]:
    if not a.strip() or not b.strip():
        raise InputError("a" if not a.strip() else "b", f"give two plans, a and b: {_HELP}")
    context = compare_context(a, b, bases, load_saved)
    return {**context["comparison"], "a_url": context["side_a"]["url"], "b_url": context["side_b"]["url"]}


def docs_context(openapi: Mapping[str, Any]) -> dict[str, Any]:
    operations = []
    for path, methods in (openapi.get("paths") or {}).items():
        for method, op in methods.items():
            operations.append({"method": method.upper(), "path": path, "summary": op.get("summary", ""),
                               "description": op.get("description", "")})
    return {"nav": "docs", "operations": operations, "title": openapi.get("info", {}).get("title", "")}

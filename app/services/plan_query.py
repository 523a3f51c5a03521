"""The URL is the state: a flat what-if query string ↔ a plan document.

`plan_from_query` turns the plan page's GET parameters into a plan document (on top of an
optional base document: a saved plan or an imported log); `query_from_plan` is its inverse
and drops every value equal to its default, so the canonical query of a what-if is short and
stable (the caller sorts the keys when it builds the URL).

Knobs that change what vLLM profiles (tp, mnbt, quant) or the budget (util) go into the document's
`whatif` section when the base has measured rows: the measured rows stay those of the run, and
the transforms move them (and a measured KV room) rather than reinterpret them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from app.core.errors import InputError
from app.core.units import GIB, MIB, parse_bytes

JSON = dict[str, Any]

DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_GPU_TOTAL = "80GiB"

# query key → (document path, kind)
FIELDS: dict[str, tuple[str, str]] = {
    "model": ("model.catalogue", "str"),
    "gpu_total": ("gpu.total", "size"),
    "ranks": ("gpu.count", "int"),
    "tp": ("layout.tp", "int"),
    "pp": ("layout.pp", "int"),
    "dp": ("layout.dp", "int"),
    "util": ("engine.gpu_memory_utilization", "float"),
    "kv_bytes": ("engine.kv_cache_memory_bytes", "size"),
    "kv_dtype": ("engine.kv_cache_dtype", "str"),
    "quant": ("engine.quantization", "str"),
    "block_size": ("engine.block_size", "int"),
    "max_model_len": ("engine.max_model_len", "int"),
    "mnbt": ("engine.max_num_batched_tokens", "int"),
    "max_num_seqs": ("engine.max_num_seqs", "int"),
    "growth": ("policy.growth_reserve", "float"),
    "reserve": ("policy.operating_reserve", "size"),
    "live": ("policy.avg_live_tokens", "int"),
    "vllm": ("vllm_version", "str"),
}
STATIC_DEFAULTS: dict[str, str] = {
    "tp": "1",
    "pp": "1",
    "dp": "1",
    "kv_dtype": "auto",
    "block_size": "16",
    "growth": "0",
    "reserve": "0",
}
WHATIF_KEYS = {
    "tp": "tp", "mnbt": "max_num_batched_tokens", "util": "gpu_memory_utilization", "quant": "quantization",
}


def field_for_path(path: str) -> str | None:
    """The query key a document field path maps to (for inline form errors)."""
    for key, (doc_path, _) in FIELDS.items():
        if path == doc_path or path.startswith(doc_path + "."):
            return key
    if path.startswith("whatif."):
        inner = path.split(".", 1)[1]
        return next((k for k, v in WHATIF_KEYS.items() if v == inner), None)
    return None


def canonical_size(n_bytes: int) -> str:
    if n_bytes and n_bytes % GIB == 0:
        return f"{n_bytes // GIB}GiB"
    if n_bytes and n_bytes % MIB == 0:
        return f"{n_bytes // MIB}MiB"
    return str(n_bytes)


def _canonical_float(value: float) -> str:
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _parse(key: str, kind: str, raw: str) -> object:
    text = raw.strip()
    try:
        if kind == "int":
            return int(text.replace(",", "").replace("_", ""))
        if kind == "float":
            value = float(text)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError
            return value
    except ValueError:
        raise InputError(key, f"expected a {'whole number' if kind == 'int' else 'number'}, got {raw!r}") from None
    if kind == "size":
        return canonical_size(parse_bytes(text, key))
    if not text:
        raise InputError(key, "must not be empty")
    return text


def canonical_value(key: str, raw: str) -> str:
    """The canonical text of one query value (raises InputError naming the key)."""
    kind = FIELDS[key][1]
    value = _parse(key, kind, raw)
    if isinstance(value, float):
        return _canonical_float(value)
    return str(value)


def _set(doc: JSON, path: str, value: object) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _measured_base(doc: Mapping[str, object]) -> bool:
    return bool(doc.get("ranks")) or doc.get("from_log") is not None


def plan_from_query(params: Mapping[str, str], base_doc: Mapping[str, object] | None = None) -> JSON:
    """A plan document from flat what-if parameters (unknown keys are ignored)."""
    doc: JSON = copy.deepcopy(dict(base_doc)) if base_doc is not None else {}
    if base_doc is None:
        doc["model"] = {"catalogue": DEFAULT_MODEL}
        doc["gpu"] = {"total": DEFAULT_GPU_TOTAL}
    measured = _measured_base(doc)
    for key, (path, kind) in FIELDS.items():
        raw = params.get(key)
        if raw is None or raw.strip() == "":
            continue
        value = _parse(key, kind, raw)
        if key == "model":
            doc["model"] = {"catalogue": value}
        elif key in WHATIF_KEYS and measured:
            _set(doc, f"whatif.{WHATIF_KEYS[key]}", value)
        elif key in ("gpu_total", "ranks") and measured:
            continue
        else:
            _set(doc, path, value)
    return doc


def _get(doc: Mapping[str, object], path: str) -> object:
    node: object = doc
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def query_from_plan(doc: Mapping[str, object], base: Mapping[str, object] | None = None) -> dict[str, str]:
    """The canonical flat query of a document built by plan_from_query (defaults dropped).

    A value is dropped when it equals what the document would have without it: the base
    document's own value when the base states one, else the global default.
    """
    out: dict[str, str] = {}
    for key, (path, kind) in FIELDS.items():
        value = _get(doc, path)
        whatif = _get(doc, f"whatif.{WHATIF_KEYS[key]}") if key in WHATIF_KEYS else None
        if whatif is not None:
            value = whatif
        if value is None:
            continue
        text = _text(key, kind, value)
        reference = _get(base, path) if base is not None else None
        if reference is not None:
            if _text(key, kind, reference) != text:
                out[key] = text
            continue
        defaults = {STATIC_DEFAULTS.get(key)}
        if base is None:
            defaults |= {DEFAULT_MODEL if key == "model" else None, DEFAULT_GPU_TOTAL if key == "gpu_total" else None}
        if text not in defaults:
            out[key] = text
    return out


def _text(key: str, kind: str, value: object) -> str:
    return canonical_value(key, str(value)) if kind != "str" else str(value)

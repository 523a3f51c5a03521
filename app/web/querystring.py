"""Canonical what-if query strings: the URL is the state of the plan page.

A what-if is a flat set of keys (see KEYS). The canonical form comes from
`app.services.plan_query.query_from_plan` (defaults dropped) plus the `base` id when the plan starts from
a stored document, with keys sorted, so that equal plans have equal URLs and a URL opened
twice renders the same page. This module also maps an InputError's dotted field path back to
the form key, so that the error shows next to the field the user touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit

from app.services import plan_query

KEYS: tuple[str, ...] = (
    "base",
    "model",
    "gpu_total",
    "ranks",
    "tp",
    "pp",
    "dp",
    "util",
    "kv_bytes",
    "kv_dtype",
    "quant",
    "block_size",
    "max_model_len",
    "mnbt",
    "max_num_seqs",
    "growth",
    "reserve",
    "live",
    "vllm",
)

#: Dotted field paths of the plan document (longest prefix wins) → the flat what-if key.
FIELD_KEYS: dict[str, str] = {
    "base": "base",
    "model": "model",
    "model.kv_bytes_per_token": "model",
    "model.config": "model",
    "gpu": "gpu_total",
    "gpu.total": "gpu_total",
    "ranks": "ranks",
    "layout.tp": "tp",
    "layout.pp": "pp",
    "layout.dp": "dp",
    "layout": "tp",
    "engine.gpu_memory_utilization": "util",
    "engine.kv_cache_memory_bytes": "kv_bytes",
    "engine.kv_cache_dtype": "kv_dtype",
    "engine.quantization": "quant",
    "engine.block_size": "block_size",
    "engine.max_model_len": "max_model_len",
    "engine.max_num_batched_tokens": "mnbt",
    "engine.max_num_seqs": "max_num_seqs",
    "policy.growth_reserve": "growth",
    "policy.operating_reserve": "reserve",
    "policy.avg_live_tokens": "live",
    "vllm_version": "vllm",
    "vllm": "vllm",
}
FIELD_KEYS.update({key: key for key in KEYS})
FIELD_KEYS_SET = frozenset(KEYS)


def clean(params: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The known what-if keys of a request, stripped, empty values dropped (last value wins)."""
    items = params.items() if isinstance(params, Mapping) else params
    out: dict[str, str] = {}
    for key, value in items:
        if key in FIELD_KEYS_SET:
            text = value.strip()
            if text:
                out[key] = text
            else:
                out.pop(key, None)
    return out


def encode(query: Mapping[str, str]) -> str:
    """A query string with keys sorted (no leading '?')."""
    return urlencode(sorted(query.items()))


def page_url(path: str, query: Mapping[str, str]) -> str:
    """`path?sorted-query`, or just `path` when the query is empty."""
    text = encode(query)
    return f"{path}?{text}" if text else path


def from_text(text: str) -> dict[str, str]:
    """The what-if keys of a pasted URL or query string ("/plan?util=0.8", "util=0.8", "?util=0.8")."""
    text = text.strip()
    if "?" in text or text.startswith(("http://", "https://", "/")):
        text = urlsplit(text).query
    return clean(parse_qsl(text, keep_blank_values=True))


def field_key(field: str) -> str | None:
    """The form key an InputError's dotted path belongs to ("engine.block_size" → "block_size")."""
    if field in FIELD_KEYS_SET:
        return field
    from_planning = plan_query.field_for_path(field)
    if from_planning is not None:
        return from_planning
    found = key_for_path(field, FIELD_KEYS)
    if found is not None:
        return found
    head = field.split(".", 1)[0].split("[", 1)[0]
    return FIELD_KEYS.get(head)


def key_for_path(field: str, keys: Mapping[str, str]) -> str | None:
    """The form key of the longest prefix of a dotted/indexed path in `keys`
    ("ramp[2]" → keys["ramp"], "engine.block_size.x" → keys["engine.block_size"]); None if none."""
    path = field
    while path:
        if path in keys:
            return keys[path]
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            break
        path = path[:cut]
    return None

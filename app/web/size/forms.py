"""The /size form: flat query keys ↔ a sizing document (`app.sizing_schema`).

The URL is the state, as on every page: each field is one query key; lists are comma-separated
("H100 80GB, H200 141GB", "auto, fp8", "none, fp8"). A blank field takes the document's default.
Errors name the form key (`gpus`, `concurrency`) so they show beside the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.errors import InputError
from app.services.plan_query import longest_prefix_key

#: (query key, label) in form order.
KEYS: tuple[str, ...] = ("model", "max_model_len", "concurrency", "live", "tokens", "gpus", "max_gpus", "tp", "pp",
                         "kv_dtype", "quant", "util", "engines", "growth", "vllm", "limit", "allow_long")  # fmt: skip
#: The example the page opens with (issue 13): Llama-3.1-70B, 32k context, 40 × 12k live tokens.
EXAMPLE: dict[str, str] = {
    "model": "llama-3.1-70b", "max_model_len": "32768", "concurrency": "40", "live": "12000",
    "gpus": "H100 80GB, H200 141GB, A100 80GB, L40S 48GB", "max_gpus": "16", "pp": "1, 2",
    "kv_dtype": "auto, fp8", "quant": "none, fp8", "util": "0.9", "engines": "1, 2, 4", "growth": "0.08",
}  # fmt: skip
#: Document path → form key (the longest prefix wins: "gpus[2]" → gpus).
PATH_KEYS: dict[str, str] = {
    "model": "model", "target.max_model_len": "max_model_len", "target.concurrency": "concurrency",
    "target.avg_live_tokens": "live", "target.tokens": "tokens", "target": "concurrency", "gpus": "gpus",
    "max_gpus": "max_gpus", "options.tp": "tp", "options.pp": "pp", "options.kv_cache_dtype": "kv_dtype",
    "options.quantization": "quant", "options.gpu_memory_utilization": "util", "options.engines_per_gpu": "engines",
    "options": "gpus", "policy.growth_reserve": "growth", "vllm_version": "vllm", "limit": "limit",
    "engine.allow_long_max_model_len": "allow_long",
}  # fmt: skip
#: Checkboxes: an unticked one submits "false" (the hidden field before it), the document's default,
#: left out of the canonical URL as a blank field is.
CHECKBOXES = ("allow_long",)


def field_key(path: str) -> str | None:
    return longest_prefix_key(path, PATH_KEYS) or (path if path in KEYS else None)


def clean(params: Mapping[str, str]) -> dict[str, str]:
    """The form's keys of a request, stripped, blanks (and unticked boxes) dropped."""
    return {k: v.strip() for k, v in params.items()
            if k in KEYS and v.strip() and not (k in CHECKBOXES and v.strip() == "false")}  # fmt: skip


def _int(key: str, text: str) -> int:
    try:
        return int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise InputError(key, f"expected a whole number, got {text!r}") from None


def _float(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(key, f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise InputError(key, f"expected a finite number, got {text!r}")
    return value


def _items(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _ints(key: str, text: str) -> list[int]:
    return [_int(key, part) for part in _items(text)]


def document(query: Mapping[str, str]) -> dict[str, Any]:
    """The sizing document of a form query (unknown keys are ignored)."""
    q = clean(query)
    target: dict[str, Any] = {}
    for key, name in (("max_model_len", "max_model_len"), ("concurrency", "concurrency"),
                      ("live", "avg_live_tokens"), ("tokens", "tokens")):  # fmt: skip
        if key in q:
            target[name] = _int(key, q[key])
    doc: dict[str, Any] = {"model": {"catalogue": q.get("model", EXAMPLE["model"])}, "target": target}
    if "gpus" in q:
        doc["gpus"] = _items(q["gpus"])
    options: dict[str, Any] = {}
    for key, name in (("tp", "tp"), ("pp", "pp"), ("engines", "engines_per_gpu")):
        if key in q:
            options[name] = _ints(key, q[key])
    if "kv_dtype" in q:
        options["kv_cache_dtype"] = _items(q["kv_dtype"])
    if "quant" in q:
        options["quantization"] = [None if v.lower() in ("none", "null", "-") else v for v in _items(q["quant"])]
    if "util" in q:
        options["gpu_memory_utilization"] = [_float("util", v) for v in _items(q["util"])]
    doc["options"] = options
    for key, name in (("max_gpus", "max_gpus"), ("limit", "limit")):
        if key in q:
            doc[name] = _int(key, q[key])
    if "growth" in q:
        doc["policy"] = {"growth_reserve": _float("growth", q["growth"])}
    if "vllm" in q:
        doc["vllm_version"] = q["vllm"]
    if "allow_long" in q:
        if q["allow_long"] != "true":
            raise InputError("allow_long", f"expected true or false, got {q['allow_long']!r}")
        doc["engine"] = {"allow_long_max_model_len": True}
    return doc


def query_for(model: str, max_model_len: int | None, concurrency: int | None, live: int | None) -> dict[str, str]:
    """A /size query with a model and a target filled in (the plan page's link)."""
    out = {k: v for k, v in EXAMPLE.items() if k not in ("model", "max_model_len", "concurrency", "live")}
    out["model"] = model
    for key, value in (("max_model_len", max_model_len), ("concurrency", concurrency), ("live", live)):
        if value is not None:
            out[key] = str(value)
    return out

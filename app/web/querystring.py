"""Canonical what-if query strings: the URL is the state of the plan page.

A what-if is a flat set of keys (see KEYS: the knob table's). The canonical form comes from
`app.services.plan_query.query_from_plan` (defaults dropped) plus the `base` id when the plan starts from
a stored document, with keys sorted, so that equal plans have equal URLs and a URL opened
twice renders the same page. This module also maps an InputError's dotted field path back to
the form key, so that the error shows next to the field the user touched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit

from app.core.errors import InputError
from app.services import plan_query

#: The what-if keys: the base document's id, then every knob of `app.services.plan_query.KNOBS`, then
#: `from`, the saved plan (`/p/<slug>`) a what-if edits: it changes no number, and saving the
#: what-if makes a new version of that plan (issue 17 item 17).
FROM_KEY = "from"
KEYS: tuple[str, ...] = ("base", *(knob.key for knob in plan_query.KNOBS), FROM_KEY)
_SLUG = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
FIELD_KEYS_SET = frozenset(KEYS)
#: The text fields whose empty value is `key=default` (`plan_query.Knob.blank_clears`).
BLANK_CLEARS = frozenset(knob.key for knob in plan_query.KNOBS if knob.blank_clears)
#: vLLM's own names for a knob (its `vllm serve` flags and EngineArgs fields), which a link built
#: from a deployment uses: each `engine.<flag>` knob by its path, and the layout / LoRA flags by
#: name (vllm/engine/arg_utils.py EngineArgs @4dd49b06f). Read with `-` or `_`. Before, such a key
#: was dropped like an unknown one: `/plan?gpu_memory_utilization=0.5` showed the 0.92 plan.
_VLLM_FLAGS: dict[str, str] = {
    **{knob.path.split(".", 1)[1]: knob.key for knob in plan_query.KNOBS
       if knob.path.startswith("engine.") and knob.path.count(".") == 1},
    "tensor_parallel_size": "tp", "pipeline_parallel_size": "pp", "data_parallel_size": "dp",
    "enable_expert_parallel": "ep", "max_loras": "loras", "max_lora_rank": "lora_rank",
}
#: Keys of older URLs, vLLM's flag names and the environment variables of the knobs that are one
#: (`Knob.env`: "VLLM_MLA_DISABLE=1" → "mla_off=1"), read as our key ("gpu_total=80GiB" → "gpu=80GiB").
LEGACY_KEYS = {
    "gpu_total": "gpu",
    **{name: key for flag, key in _VLLM_FLAGS.items() for name in (flag, flag.replace("_", "-")) if name != key},
    **{knob.env: knob.key for knob in plan_query.KNOBS if knob.env},
}


def clean(params: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The known what-if keys of a request, stripped, empty values dropped (last value wins)."""
    items = params.items() if isinstance(params, Mapping) else params
    out: dict[str, str] = {}
    for key, value in items:
        key = LEGACY_KEYS.get(key, key)
        if key in FIELD_KEYS_SET:
            text = value.strip()
            if key == FROM_KEY and not _SLUG.match(text):
                continue  # not a saved plan's slug: ignored like an unknown key
            if text:
                out[key] = text
            elif key in BLANK_CLEARS:
                out[key] = plan_query.UNSET  # a blanked text field clears the base's value
            else:
                out.pop(key, None)
    return out


def written_keys(params: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The name the request wrote for each what-if key it sets through another name (a vLLM flag,
    an environment variable, an older key): {"util": "gpu-memory-utilization"}. As `clean` reads
    them, the last value of a key wins (and an empty one unsets it)."""
    written: dict[str, str] = {}
    for name, value in params:
        key = LEGACY_KEYS.get(name, name)
        if key in FIELD_KEYS_SET:
            if value.strip():
                written[key] = name
            else:
                written.pop(key, None)
    return {key: name for key, name in written.items() if name != key}


def as_written(exc: InputError, params: Iterable[tuple[str, str]]) -> InputError:
    """An error of a what-if key the request set by another name, under that name: a link with
    `gpu-memory-utilization=1.7` was told "gpu_memory_utilization … out of range" under `util`,
    and did not see which of its inputs was wrong."""
    under, field = ("plan.", exc.field[5:]) if exc.field.startswith("plan.") else ("", exc.field)  # the simulator's
    key = field_key(field) if field else None
    written = written_keys(params).get(key) if key is not None else None
    if key is None or written is None:
        return exc
    path = plan_query.BY_KEY[key].path if key in plan_query.BY_KEY else key
    read_as = key if path == key else f"{key}: {path}"
    return exc.as_written(under + written, written, read_as, subject=field.rsplit(".", 1)[-1])


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
    """The form key an InputError's dotted path belongs to ("engine.block_size" → "block_size"; a
    key the request wrote by another name, "gpu-memory-utilization" → "util")."""
    if field in FIELD_KEYS_SET:
        return field
    if field in LEGACY_KEYS:
        return LEGACY_KEYS[field]
    return plan_query.field_for_path(field)

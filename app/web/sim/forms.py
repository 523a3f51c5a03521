"""The simulator form: flat form keys ↔ a simulation document, and errors back to form keys.

The form (and the /sim query string that pre-fills it) uses flat keys (FORM_DEFAULTS). The pool
comes either from the plan page's what-if keys (`app.web.querystring.KEYS`: the binding rank of
that plan) or from `pool_blocks`/`pool_block_size`. Lengths may be pasted or uploaded as a
JSON list or as CSV (one column, or a column whose header names prompt/output). Every parse
error is an InputError with the document's field path, which `form_key` maps back to the form
field, so a message shows next to the field whether it came from here or from the core.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

from app.core.errors import InputError
from app.core.sim.cost import CostModel
from app.core.sim.io import Z99
from app.core.sim.workload import DEFAULT_OUTPUT, DEFAULT_PROMPT
from app.core.versions import batch_defaults
from app.services.plan_query import longest_prefix_key, plan_from_query
from app.web import querystring

JSON = dict[str, Any]
COST_KEYS = tuple(asdict(CostModel()))
#: Seed 002's workload: its 24 GB card's pool, 70 % of requests sharing a 512-token prefix.
FORM_DEFAULTS: dict[str, str] = {
    "pool_blocks": "1783",
    "pool_block_size": "16",
    # lengths as a median and a p99 in tokens: seed 002's lognormal(6.6, 0.9) and the output default
    **{f"{side}_{key}": str(value) for side, dist in (("prompt", DEFAULT_PROMPT), ("output", DEFAULT_OUTPUT))
       for key, value in (("median", round(math.exp(dist.mean))),
                          ("p99", round(math.exp(dist.mean + Z99 * dist.sigma))),
                          ("min", dist.min_tokens), ("max", dist.max_tokens))},
    "prompt_lengths": "",
    "output_lengths": "",
    "shared_prefix_tokens": "512",
    "shared_fraction": "0.7",
    "requests_per_level": "2000",
    "ramp": "1, 2, 4, 8, 12, 16, 24, 32, 48, 64",
    "seed": "2",
    "sched_max_num_seqs": "",
    "sched_max_num_batched_tokens": "",
    "prefix_caching": "on",
    # blank: from the plan (a roofline estimate, app.services.simulation.plan_step_cost), else illustrative
    **{f"cost_{key}": "" for key in asdict(CostModel())},
}
FORM_KEYS = frozenset(FORM_DEFAULTS)
#: Not carried in "run again" links: a pasted list can be far longer than a URL may be.
NOT_IN_URL = frozenset({"prompt_lengths", "output_lengths"})

#: Document field paths (longest prefix wins) → form keys.
FIELD_KEYS: dict[str, str] = {
    "pool": "pool_blocks",
    "pool.blocks": "pool_blocks",
    "pool.block_size": "pool_block_size",
    "workload.shared_prefix_tokens": "shared_prefix_tokens",
    "workload.shared_fraction": "shared_fraction",
    "workload.requests_per_level": "requests_per_level",
    "ramp": "ramp",
    "seed": "seed",
    "scheduler.max_num_seqs": "sched_max_num_seqs",
    "scheduler.max_num_batched_tokens": "sched_max_num_batched_tokens",
    "scheduler.enable_prefix_caching": "prefix_caching",
    **{f"cost_model.{key}": f"cost_{key}" for key in COST_KEYS},
    **{f"workload.{side}_tokens{suffix}": f"{side}_{key}" for side in ("prompt", "output")
       for suffix, key in ((".median", "median"), (".p99", "p99"), (".lognormal", "median"),
                           (".min", "min"), (".max", "max"), ("", "lengths"))},
}


def form_key(field: str) -> str | None:
    """The form key an InputError's field path belongs to ("ramp[2]" → "ramp"); None if none."""
    return longest_prefix_key(field, FIELD_KEYS)


def form_values(params: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The form's values: the defaults overlaid with the non-blank sim keys given."""
    values = dict(FORM_DEFAULTS)
    for key, value in params:
        if key in FORM_KEYS and value.strip():
            values[key] = value.strip() if key not in NOT_IN_URL else value
    return values


def rerun_query(values: Mapping[str, str], plan_query: Mapping[str, str]) -> dict[str, str]:
    """The /sim query that pre-fills the form with these values (defaults and lists left out)."""
    query = {k: v for k, v in values.items() if k not in NOT_IN_URL and v != FORM_DEFAULTS.get(k)}
    return {**query, **plan_query}


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:40] + "…")


def _int(text: str, path: str) -> int:
    cleaned = text.strip().replace(",", "").replace("_", "")
    if not re.fullmatch(r"[+-]?\d+", cleaned):
        raise InputError(path, f"must be a whole number, got {_shown(text)}")
    return int(cleaned)


def _float(text: str, path: str) -> float:
    try:
        return float(text.strip().replace(",", "").replace("_", ""))
    except ValueError:
        raise InputError(path, f"must be a number, got {_shown(text)}") from None


def parse_lengths(text: str, path: str, column_hint: str) -> list[int]:
    """Token lengths from a JSON list or CSV text.

    With a header row, the column whose name contains `column_hint` ("prompt", "output"), else the
    first; without one, every number in the text (a list wrapped over lines or separated by commas)."""
    text = text.strip().lstrip("\ufeff")
    if text.startswith("["):
        try:
            values = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(path, f"is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                   for v in values):
            raise InputError(path, "a JSON list of lengths must hold whole numbers only")
        return values
    rows = [row for row in csv.reader(io.StringIO(text.replace(";", ","))) if any(c.strip() for c in row)]
    column: int | None = None
    if rows and not all(re.fullmatch(r"\s*\d[\d_]*\s*", c) for c in rows[0] if c.strip()):
        header = [c.strip().lower() for c in rows.pop(0)]
        column = next((i for i, name in enumerate(header) if column_hint in name), 0)
    out: list[int] = []
    for line_no, row in enumerate(rows, start=1):
        cells = [row[column]] if column is not None and column < len(row) else row
        for cell in (c for c in cells if c.strip()):
            if not re.fullmatch(r"\s*\d+\s*", cell):
                raise InputError(path, f"row {line_no}: {_shown(cell)} is not a whole number of tokens")
            out.append(int(cell))
    if not out:
        raise InputError(path, "holds no lengths")
    return out


def _dist(values: Mapping[str, str], side: str, lengths_text: str) -> JSON | list[int]:
    path = f"workload.{side}_tokens"
    if lengths_text.strip():
        return parse_lengths(lengths_text, path, side)
    return {
        "median": _float(values[f"{side}_median"], f"{path}.median"),
        "p99": _float(values[f"{side}_p99"], f"{path}.p99"),
        "min": _int(values[f"{side}_min"], f"{path}.min"),
        "max": _int(values[f"{side}_max"], f"{path}.max"),
    }


def _ramp(text: str) -> list[int]:
    parts = [p for p in re.split(r"[\s,;]+", text.strip().strip("[]")) if p]
    if not parts:
        raise InputError("ramp", "give at least one concurrency level")
    return [_int(p, f"ramp[{i}]") for i, p in enumerate(parts)]


def _scheduler(values: Mapping[str, str]) -> JSON:
    out: JSON = {"enable_prefix_caching": values["prefix_caching"] != "off"}
    for form, doc in (("sched_max_num_seqs", "max_num_seqs"), ("sched_max_num_batched_tokens",
                                                                "max_num_batched_tokens")):
        if values[form].strip():
            out[doc] = _int(values[form], f"scheduler.{doc}")
    return out


def plan_document(plan_query: Mapping[str, str], base_doc: Mapping[str, Any] | None) -> JSON:
    """The plan document of the plan page's what-if query (errors under `plan.`)."""
    try:
        return plan_from_query(plan_query, base_doc)
    except InputError as exc:
        raise exc.under("plan") from None


def document(values: Mapping[str, str], plan_doc: Mapping[str, Any] | None,
             uploads: Mapping[str, str] | None = None) -> JSON:
    """The simulation document of the form (`uploads`: file text per lengths key, wins over pasted)."""
    uploads = uploads or {}
    doc: JSON = {}
    if plan_doc is not None:
        doc["plan"] = dict(plan_doc)
    else:
        doc["pool"] = {"blocks": _int(values["pool_blocks"], "pool.blocks"),
                       "block_size": _int(values["pool_block_size"], "pool.block_size")}
    doc["workload"] = {
        "prompt_tokens": _dist(values, "prompt", uploads.get("prompt_lengths") or values["prompt_lengths"]),
        "output_tokens": _dist(values, "output", uploads.get("output_lengths") or values["output_lengths"]),
        "shared_prefix_tokens": _int(values["shared_prefix_tokens"], "workload.shared_prefix_tokens"),
        "shared_fraction": _float(values["shared_fraction"], "workload.shared_fraction"),
        "requests_per_level": _int(values["requests_per_level"], "workload.requests_per_level"),
    }
    doc["ramp"] = _ramp(values["ramp"])
    doc["seed"] = _int(values["seed"], "seed")
    doc["scheduler"] = _scheduler(values)
    if plan_doc is None:
        # a bare pool: vLLM's API-server defaults for a GPU under 70 GiB, like seed 002's 24 GB card
        # (with a plan, app.services.simulation takes them from the plan's engine settings instead)
        mnbt, seqs = batch_defaults(None)
        doc["scheduler"].setdefault("max_num_batched_tokens", mnbt)
        doc["scheduler"].setdefault("max_num_seqs", seqs)
    cost = {key: _float(values[f"cost_{key}"], f"cost_model.{key}")
            for key in COST_KEYS if values[f"cost_{key}"].strip()}
    if cost:
        doc["cost_model"] = cost
    return doc


def plan_query_of(params: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The plan page's what-if keys among the parameters (the pool then comes from that plan)."""
    return querystring.clean(list(params))

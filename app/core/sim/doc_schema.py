"""The simulation document as a JSON schema (for OpenAPI), stated from what `io.parse` accepts.

`io.parse` is the validator (its messages name the field); this schema describes the same
document: the same keys (objects refuse unknown ones), the same integer/number bounds. A test
(tests/core/sim/test_doc_schema.py) checks every key set and bound here against the parser.
The top-level `plan` (a plan document whose binding rank gives the pool) is resolved by the
service layer before `parse` runs; give `plan` or `pool`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from app.core.sim.cost import CostModel
from app.core.sim.io import MAX_BLOCKS, MAX_LEVELS, MAX_LIST, MAX_TOKENS, MIN_BATCHED_TOKENS


def _int(lo: int, hi: int, description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "integer", "minimum": lo, "maximum": hi}
    return {**out, "description": description} if description else out


def _num(lo: float, hi: float) -> dict[str, Any]:
    return {"type": "number", "minimum": lo, "maximum": hi}


def _obj(properties: dict[str, Any], required: tuple[str, ...] = (), description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    if description:
        out["description"] = description
    return out


def _lengths(description: str) -> dict[str, Any]:
    listed = {"type": "array", "items": _int(1, MAX_TOKENS), "minItems": 1, "maxItems": MAX_LIST,
              "description": "measured lengths, drawn uniformly"}
    lognormal = _obj({
        "lognormal": _obj({"mean": _num(-50.0, 50.0), "sigma": _num(0.0, 10.0)}, ("mean", "sigma")),
        "median": _num(1.0, MAX_TOKENS), "p99": _num(1.0, MAX_TOKENS),
        "min": _int(1, MAX_TOKENS), "max": _int(1, MAX_TOKENS),
    }, (), "a lognormal clipped to [min, max]: μ and σ of ln tokens, or median and p99 in tokens (p99 ≥ median)")
    either = ({"required": ["median"]}, {"required": ["p99"]})
    lognormal["oneOf"] = [  # io._lengths: lognormal, or median with p99, never both
        {"required": ["lognormal"], "not": {"anyOf": list(either)}},
        {"required": ["median", "p99"], "not": {"required": ["lognormal"]}},
    ]
    return {"description": description, "anyOf": [listed, lognormal]}


def simulation_document_schema() -> dict[str, Any]:
    """The JSON schema of a simulation document (`kvledger simulate`, POST /api/v1/simulate)."""
    return _obj({
        "pool": _obj({"blocks": _int(2, MAX_BLOCKS, "KV blocks of the binding rank (one is vLLM's null block)"),
                      "block_size": _int(1, 4096, "tokens per block")}, ("blocks",)),
        "pool_source": {"type": "string", "description": "where the pool came from (echoed)"},
        "cost_source": {"type": "string", "description": "where the step-cost model came from (echoed)"},
        "plan": {"type": "object", "description": "a plan document: the pool of its binding rank (instead of pool)"},
        "workload": _obj({
            "prompt_tokens": _lengths("prompt lengths"),
            "output_tokens": _lengths("output lengths"),
            "shared_prefix_tokens": _int(0, MAX_TOKENS),
            "shared_fraction": _num(0.0, 1.0),
            "prefix_groups": _int(1, 100_000),
            "requests_per_level": _int(1, 10**8),
        }),
        "ramp": {"type": "array", "items": _int(1, 100_000), "minItems": 1, "maxItems": MAX_LEVELS,
                 "description": "strictly increasing concurrency levels"},
        "seed": _int(0, 2**63 - 1),
        "scheduler": _obj({"max_num_seqs": _int(1, 100_000),
                           "max_num_batched_tokens": _int(MIN_BATCHED_TOKENS, MAX_TOKENS),
                           "enable_prefix_caching": {"type": "boolean"}}),
        "cost_model": _obj({f.name: _num(0.0, 1e3) for f in fields(CostModel)}),
        "kv_tier": _obj({"blocks": _int(0, MAX_BLOCKS, "the offload tier's capacity in GPU blocks"),
                         "block_load_s": _num(0.0, 10.0)}, ("blocks",),
                        "an offload tier behind the pool: retained blocks spill to it, a hit loads them back"),
    }, description="A simulation document, the same JSON as `kvledger simulate` (give plan or pool).")

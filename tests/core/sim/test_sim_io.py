"""The JSON entry point: input validation and the shape of the output."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from app.core.sim import SimInputError, simulate_from_json
from app.core.sim.io import parse

BASE: dict[str, Any] = {
    "pool": {"blocks": 300, "block_size": 16},
    "workload": {
        "prompt_tokens": {"lognormal": {"mean": 5.5, "sigma": 0.8}, "min": 16, "max": 1024},
        "output_tokens": [8, 16, 32, 64],
        "shared_prefix_tokens": 128,
        "shared_fraction": 0.5,
        "requests_per_level": 50,
    },
    "ramp": [1, 4],
    "seed": 1,
}


def _with(path: str, value: object) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return doc


def _without(path: str) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[key]
    del node[last]
    return doc


BAD: list[tuple[object, str, str]] = [
    ([], "$", "must be an object, not a list"),
    (_without("pool"), "pool", "is required"),
    (_with("pool", 5), "pool", "must be an object, not int"),
    (_without("pool.blocks"), "pool.blocks", "is required"),
    (_with("pool.blocks", "300 blocks"), "pool.blocks", "must be an integer, not a string"),  # "300" reads as 300
    (_with("pool.blocks", True), "pool.blocks", "must be an integer, not a boolean"),
    (_with("pool.blocks", 1), "pool.blocks", "between 2 and"),
    (_with("pool.blocks", 20), "pool.blocks", "cannot hold the longest possible request: it needs 68"),
    (_with("pool.block_size", 0), "pool.block_size", "between 1 and 4096"),
    (_with("pool.colour", "red"), "pool.colour", "unknown field"),
    (_with("pool_source", 3), "pool_source", "must be a string"),
    (_with("extra", 1), "$.extra", "unknown field"),
    (_with("workload.prompt_tokens", {"min": 4}), "workload.prompt_tokens.lognormal", "is required"),
    (_with("workload.prompt_tokens", {"lognormal": {"mean": 6.6}}), "workload.prompt_tokens.lognormal.sigma",
     "is required"),
    (_with("workload.prompt_tokens", {"lognormal": {"mean": 6.6, "sigma": -1}}),
     "workload.prompt_tokens.lognormal.sigma", "between 0 and 10"),
    (_with("workload.prompt_tokens", {"lognormal": {"mean": float("nan"), "sigma": 1}}),
     "workload.prompt_tokens.lognormal.mean", "finite number"),
    (_with("workload.prompt_tokens", {"lognormal": {"mean": 6, "sigma": 1}, "min": 100, "max": 50}),
     "workload.prompt_tokens.max", "must be at least min (100)"),
    (_with("workload.prompt_tokens", "lognormal"), "workload.prompt_tokens", "must be an object, not a string"),
    (_with("workload.output_tokens", []), "workload.output_tokens", "a list of lengths must hold 1 to"),
    (_with("workload.output_tokens", [8, 0]), "workload.output_tokens[1]", "between 1 and"),
    (_with("workload.output_tokens", [8, 2.5]), "workload.output_tokens[1]", "must be an integer, got 2.5"),
    (_with("workload.shared_fraction", 1.5), "workload.shared_fraction", "between 0 and 1"),
    (_with("workload.shared_prefix_tokens", -1), "workload.shared_prefix_tokens", "between 0 and"),
    (_with("workload.prefix_groups", 0), "workload.prefix_groups", "between 1 and"),
    (_with("workload.requests_per_level", 0), "workload.requests_per_level", "between 1 and"),
    (_with("workload.typo", 1), "workload.typo", "unknown field"),
    (_with("ramp", []), "ramp", "list of 1 to 64"),
    (_with("ramp", 4), "ramp", "list of 1 to 64"),
    (_with("ramp", [4, 2]), "ramp[1]", "strictly increasing"),
    (_with("ramp", [1, None]), "ramp[1]", "must be an integer, not null"),
    (_with("seed", -1), "seed", "between 0 and"),
    (_with("scheduler", {"max_num_seqs": 0}), "scheduler.max_num_seqs", "between 1 and"),
    (_with("scheduler", {"enable_prefix_caching": "yes"}), "scheduler.enable_prefix_caching", "true or false"),
    (_with("scheduler", []), "scheduler", "must be an object"),
    (_with("scheduler", {"max_num_batched_tokens": 32}), "scheduler.max_num_batched_tokens", "between 64 and"),
    (_with("scheduler", {"max_num_batched_tokens": 128}), "scheduler.max_num_batched_tokens",
     "must be at least max_num_seqs (256), got 128"),
    (_with("cost_model", {"base_s": 0}), "cost_model.base_s", "must be above 0"),
    (_with("cost_model", {"per_prefill_token_s": -1e-3}), "cost_model.per_prefill_token_s", "between 0"),
    (_with("cost_model", {"gpu": "h100"}), "cost_model.gpu", "unknown field"),
]


@pytest.mark.parametrize(("doc", "field", "message"), BAD, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD)])
def test_bad_input_names_the_field(doc: Any, field: str, message: str) -> None:
    with pytest.raises(SimInputError) as info:
        simulate_from_json(doc)
    assert info.value.field_path == field
    assert message in info.value.message
    assert str(info.value).startswith(f"{field}: ")
    assert isinstance(info.value, ValueError)


def test_max_work_caps_requests_times_levels() -> None:
    with pytest.raises(SimInputError) as info:
        simulate_from_json(BASE, max_work=99)
    assert info.value.field_path == "workload.requests_per_level"
    assert "50 × 2" not in info.value.message and "= 100 exceeds the limit of 99" in info.value.message
    assert simulate_from_json(BASE, max_work=100)["levels"]


def test_output_shape_and_echo() -> None:
    doc = {**BASE, "pool_source": "plan abc, rank 3", "plan": {"ignored": True}}
    result = simulate_from_json(doc)
    json.dumps(result, allow_nan=False)  # JSON-able as is
    for key in ("levels", "peak_concurrency", "recommended_concurrency", "recommendation_rule",
                "without_prefix", "input"):
        assert key in result
    levels = result["levels"]
    assert isinstance(levels, list) and len(levels) == 2
    for key in ("concurrency", "throughput_tokens_per_s", "requests_per_s", "kv_usage", "kv_usage_peak",
                "prefix_hit_rate", "preemptions", "evictions", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
                "tpot_p99_s"):
        assert key in levels[0]
    echo = result["input"]
    assert isinstance(echo, dict)
    assert echo["pool_source"] == "plan abc, rank 3"
    assert echo["pool"] == {"blocks": 300, "block_size": 16, "usable_blocks": 299, "tokens": 4784}
    assert echo["workload"]["output_tokens"] == [8, 16, 32, 64]
    assert echo["scheduler"] == {"max_num_seqs": 256, "max_num_batched_tokens": 8192,
                                 "enable_prefix_caching": True}


def test_defaults_are_seed_002() -> None:
    cfg, seed, source = parse({"pool": {"blocks": 1783}})
    assert (seed, source, cfg.block_size, cfg.requests_per_level) == (0, None, 16, 2000)
    assert cfg.workload.prompt.largest == 8192
    assert cfg.workload.shared_fraction == 0.0

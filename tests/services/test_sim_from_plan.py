"""The simulator opened from a plan (issue 17 item 9): the step cost is a roofline from the
plan's model, layout and GPU preset (and says it is an estimate); lengths come as a median and a
p99 in tokens, and the implied distribution is echoed."""

from __future__ import annotations

import math
import random
import statistics
from typing import Any

import pytest

from app.core.errors import InputError
from app.core.gpu_perf import PERF
from app.core.gpus import PRESETS
from app.core.sim.cost import CostModel, ReplicaShape, roofline_cost
from app.core.sim.io import Z99, parse, simulate_from_json
from app.core.sim.workload import Lognormal
from app.services import plans
from app.services.simulation import resolve_pool

H100_BW, H100_FLOPS = 3.35e12, 989e12  # NVIDIA H100 SXM5 datasheet (dense BF16)


def _plan(tp: int, pp: int = 1, gpu: dict[str, object] | None = None) -> dict[str, object]:
    return {
        "model": {"catalogue": "llama-3.1-70b"},
        "gpu": gpu or {"name": "H100 80GB"},
        "layout": {"tp": tp, "pp": pp},
    }


def test_the_step_cost_of_a_70b_tp4_plan_is_its_roofline() -> None:
    result = plans.run_plan(_plan(4), with_levers=False)
    weights = max(r["weights_bytes"] for r in result["ranks"])
    resolved = resolve_pool({"plan": _plan(4)})
    cost = resolved["cost_model"]
    # independent arithmetic: bf16 weights (2 bytes a parameter), one stage, H100 SXM peak figures
    assert cost["base_s"] == pytest.approx(weights / H100_BW)
    assert cost["per_kv_token_read_s"] == pytest.approx(80 * 2 * (8 // 4) * 128 * 2 / H100_BW)
    assert cost["per_prefill_token_s"] == pytest.approx(2 * (weights / 2) / H100_FLOPS)
    assert 0.009 < cost["base_s"] < 0.012  # ~35 GB per rank at 3.35 TB/s: ~10.5 ms, not the 8B default 16 ms
    assert resolved["cost_source"].startswith("roofline estimate") and "(SXM5: 3.35 TB/s" in resolved["cost_source"]


def test_more_tp_lowers_the_step_and_pp_stages_add_up() -> None:
    base = {tp: resolve_pool({"plan": _plan(tp)})["cost_model"]["base_s"] for tp in (4, 8)}
    assert base[8] < base[4]
    pp2 = resolve_pool({"plan": _plan(4, 2)})["cost_model"]
    assert pp2["base_s"] == pytest.approx(base[4], rel=0.05)  # half the weights per rank, two stages in turn


def test_a_plan_without_a_preset_keeps_the_illustrative_cost_and_says_why() -> None:
    resolved = resolve_pool({"plan": _plan(4, gpu={"total": "80 GiB"})})
    assert resolved["cost_model"] == {
        "base_s": 0.016,
        "per_prefill_token_s": 0.16e-3,
        "per_decode_seq_s": 0.1e-3,
        "per_kv_token_read_s": 0.13e-6,
    }
    assert "names no GPU preset" in resolved["cost_source"]


def test_given_cost_fields_win_over_the_estimate() -> None:
    resolved = resolve_pool({"plan": _plan(4), "cost_model": {"base_s": 0.05}})
    assert resolved["cost_model"]["base_s"] == 0.05 and "given: base_s" in resolved["cost_source"]


def test_every_perf_figure_names_a_preset_and_a_source() -> None:
    names = {p.name for p in PRESETS}
    assert set(PERF) <= names
    for perf in PERF.values():
        assert perf.hbm_bytes_per_s > 1e11 and perf.bf16_flops > 1e13 and perf.source
    with pytest.raises(ValueError):
        roofline_cost(ReplicaShape(1, 1, 1, 2.0), 0.0, 1.0)


def test_roofline_time_never_falls_with_more_weights() -> None:
    a, _ = roofline_cost(ReplicaShape(10**10, 10**5, 1, 2.0), H100_BW, H100_FLOPS)
    b, _ = roofline_cost(ReplicaShape(2 * 10**10, 10**5, 1, 2.0), H100_BW, H100_FLOPS)
    assert b.base_s == pytest.approx(2 * a.base_s) and b.per_prefill_token_s == pytest.approx(2 * a.per_prefill_token_s)
    assert isinstance(a, CostModel)


def test_median_and_p99_give_that_lognormal() -> None:
    doc = {
        "pool": {"blocks": 70000},
        "workload": {"prompt_tokens": {"median": 735, "p99": 5968, "min": 1, "max": 10**6}},
        "ramp": [1],
    }
    cfg, _, _ = parse(doc)
    dist = cfg.workload.prompt
    assert isinstance(dist, Lognormal)
    assert dist.mean == pytest.approx(math.log(735)) and dist.sigma == pytest.approx(
        (math.log(5968) - math.log(735)) / Z99
    )
    assert dist.sigma == pytest.approx(0.9, abs=0.001)  # seed 002's lognormal(6.6, 0.9)
    rng = random.Random(7)
    draws = sorted(dist.sample(rng) for _ in range(20_000))
    assert statistics.median(draws) == pytest.approx(735, rel=0.03)
    assert draws[int(0.99 * len(draws))] == pytest.approx(5968, rel=0.08)


def test_the_implied_distribution_is_echoed() -> None:
    doc = {
        "pool": {"blocks": 4000},
        "workload": {"prompt_tokens": {"median": 735, "p99": 5968, "min": 64, "max": 8192}, "requests_per_level": 50},
        "ramp": [2],
    }
    echoed: Any = simulate_from_json(doc)["input"]
    implied = echoed["workload"]["prompt_tokens"]["implied"]
    assert implied["p50"] == pytest.approx(735) and implied["p99"] == pytest.approx(5968)
    assert implied["p10"] < implied["p50"] < implied["p90"] < implied["p99"]
    assert implied["mean_unclipped"] == pytest.approx(math.exp(math.log(735) + 0.9**2 / 2), rel=0.01)
    assert 0 < implied["clipped_low"] < 0.01 and 0 < implied["clipped_high"] < 0.01


@pytest.mark.parametrize(("spec", "field"), [
    ({"median": 500, "p99": 100}, "workload.prompt_tokens.p99"),
    ({"median": 500}, "workload.prompt_tokens.p99"),
    ({"median": 0, "p99": 100}, "workload.prompt_tokens.median"),
    ({"median": 500, "p99": 900, "lognormal": {"mean": 1, "sigma": 1}}, "workload.prompt_tokens.lognormal"),
])  # fmt: skip
def test_bad_median_p99_names_the_field(spec: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as err:
        parse({"pool": {"blocks": 4000}, "workload": {"prompt_tokens": spec}})
    assert err.value.field == field

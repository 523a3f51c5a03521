"""The simulator's offload tier (issue 15 item 4) and prefix caching on/off (item 6): prefix blocks
the pool evicts spill to the tier instead of being dropped, a later hit loads them back at a
transfer cost (app.core.sim.tier), and with prefix caching off nothing is retained anywhere."""

from __future__ import annotations

import copy
import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.core.sim import simulate_from_json
from app.core.sim.cost import CostModel
from app.core.sim.engine import Engine
from app.core.sim.state import SchedulerConfig
from app.core.sim.tier import KVTier, TierConfig
from app.core.sim.workload import Lognormal, Workload, make_requests

# Many prefix groups, each longer than what the small pool can keep once the load runs: retained
# prefix blocks are evicted between two requests of a group.
BASE: dict[str, Any] = {
    "pool": {"blocks": 400, "block_size": 16},
    "workload": {"prompt_tokens": {"lognormal": {"mean": 6.0, "sigma": 0.5}, "min": 64, "max": 1500},
                 "output_tokens": [16, 32, 64], "shared_prefix_tokens": 1024, "shared_fraction": 0.9,
                 "prefix_groups": 12, "requests_per_level": 300},
    "ramp": [2, 6],
    "seed": 7,
}


def _run(**extra: Any) -> list[dict[str, Any]]:
    doc = copy.deepcopy(BASE)
    for key, value in extra.items():
        doc[key] = value
    levels = simulate_from_json(doc)["levels"]
    assert isinstance(levels, list)
    return levels


def test_a_tier_turns_evictions_into_hits_and_times_the_loads() -> None:
    plain = _run()
    tiered = _run(kv_tier={"blocks": 20_000, "block_load_s": 1e-4})
    assert any(level["evictions"] > 0 for level in plain)
    for a, b in zip(plain, tiered, strict=True):
        assert b["prefix_hit_rate"] >= a["prefix_hit_rate"]
    assert sum(level["tier_hit_tokens"] for level in tiered) > 0
    assert all("tier_hit_tokens" not in level for level in plain)  # no tier: the output is as before
    for level in tiered:  # the transfer time is the blocks loaded × one block's time
        assert abs(level["tier_load_s"] - level["tier_hit_tokens"] / 16 * 1e-4) < 1e-9


def test_an_empty_tier_changes_nothing() -> None:
    plain = _run()
    empty = _run(kv_tier={"blocks": 0, "block_load_s": 1.0})
    assert plain == empty  # a tier of 0 blocks is no tier


def test_a_slower_link_costs_time_not_hits() -> None:
    fast = _run(kv_tier={"blocks": 20_000, "block_load_s": 0.0})
    slow = _run(kv_tier={"blocks": 20_000, "block_load_s": 0.05})
    assert sum(lv["tier_load_s"] for lv in slow) > 0
    assert slow[0]["throughput_tokens_per_s"] < fast[0]["throughput_tokens_per_s"]


def test_prefix_caching_off_retains_nothing_even_with_a_tier() -> None:
    levels = _run(kv_tier={"blocks": 20_000, "block_load_s": 1e-4},
                  scheduler={"enable_prefix_caching": False})
    assert all(lv["prefix_hit_rate"] == 0 and lv["tier_hit_tokens"] == 0 for lv in levels)


def test_the_pool_is_conserved_with_a_tier() -> None:
    workload = Workload(prompt=Lognormal(6.0, 0.5, 64, 1500), shared_prefix_tokens=1024, shared_fraction=0.9,
                        prefix_groups=12)
    requests = make_requests(workload, 200, random.Random(3))
    engine = Engine(blocks=400, block_size=16, sched=SchedulerConfig(), cost=CostModel(), requests=requests,
                    concurrency=6, prefix_tokens=1024, tier=TierConfig(blocks=500, block_load_s=1e-4))
    engine.run()
    engine.pool.check()
    assert engine.tier is not None and 0 < len(engine.tier) <= 500


@given(capacity=st.integers(0, 50), keys=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30)), max_size=300))
def test_the_tier_never_holds_more_than_its_capacity(capacity: int, keys: list[tuple[int, int]]) -> None:
    tier = KVTier(capacity)
    for key in keys:
        tier.put(key)
        assert len(tier) <= capacity
        assert capacity == 0 or key in tier  # the block just stored is there
    assert tier.spills - tier.dropped == len(tier)

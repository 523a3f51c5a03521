"""Large plans summarised (issue 12 item 7): groups of identical ranks and distributions.

Each grouped result is checked against the full form of the same plan, computed independently
(the full form is what a plan of at most FULL_RANKS_MAX ranks always gives, one object per rank).
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core import rank_groups
from app.core.errors import InputError
from app.services import plans

GIB = 2**30


def rank(free: int = 79 * GIB, weights: int = 35 * GIB) -> dict[str, Any]:
    return {"total": 80 * GIB, "free_at_start": free, "weights": weights, "non_torch": GIB,
            "cuda_graphs": GIB // 2, "activation": 3 * GIB}  # fmt: skip


def doc(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": {"kv_bytes_per_token": 131072}, "layout": {"tp": 8, "dp": len(ranks) // 8},
            "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192}, "ranks": ranks}  # fmt: skip


def test_index_ranges_and_their_text() -> None:
    assert rank_groups.index_ranges([0, 1, 2, 5, 7, 8]) == [[0, 2], [5, 5], [7, 8]]
    assert rank_groups.ranges_text([[0, 63], [128, 191]]) == "0–63, 128–191"
    assert rank_groups.ranges_text([[0, 0], [2, 2]], 5) == "0, 2, … and 3 more ranges"


@given(st.lists(st.integers(0, 3), min_size=1, max_size=200), st.data())
@settings(max_examples=200, deadline=None)
def test_groups_partition_the_ranks_and_hold_equal_keys(keys: list[int], data: st.DataObject) -> None:
    binding = data.draw(st.integers(0, len(keys) - 1))
    groups = rank_groups.group_indexes(keys, binding)
    members = sorted(i for _, m in groups for i in m)
    assert members == list(range(len(keys)))
    assert len(groups) == len(set(keys))
    for rep, m in groups:
        assert rep in m and len({keys[i] for i in m}) == 1
        assert m == sorted(m)
        runs = rank_groups.index_ranges(m)
        assert [i for a, b in runs for i in range(a, b + 1)] == m
    assert any(rep == binding for rep, _ in groups)


def test_spread_and_histogram_against_the_statistics_module() -> None:
    values = [5, 1, 9, 9, 3, 7]
    assert rank_groups.spread(values) == {"min": 1, "median": int(statistics.median(values)), "max": 9, "known": 6}
    assert rank_groups.spread([None, None]) is None
    hist = rank_groups.histogram(list(range(100)))
    assert hist is not None and sum(hist["counts"]) == 100 and len(hist["counts"]) == 10
    assert rank_groups.histogram([4, 4, 4]) == {"low_bytes": 4, "high_bytes": 4, "counts": [3]}


def test_small_plans_keep_the_full_form() -> None:
    out = plans.run_plan(doc([rank() for _ in range(16)]))
    assert out["ranks_form"] == "full" and out["rank_groups"] is None and len(out["ranks"]) == 16
    assert [r["index"] for r in out["ranks"]] == list(range(16))
    assert out["rank_distribution"]["ranks"] == 16


def test_a_grouped_plan_says_what_the_full_form_says() -> None:
    """2,048 ranks of 32 kinds: each group's representative has the rows every member has in the
    full form (computed rank by rank below the threshold, by halves of 1,024)."""
    ranks = [rank(free=79 * GIB - (i % 32) * 4096 * 1024) for i in range(2048)]
    out = plans.run_plan(doc(ranks))
    assert out["ranks_form"] == "grouped" and out["layout"]["ranks"] == 2048
    assert len(out["rank_groups"]) == len(out["ranks"]) == 32 and out["rank_groups_omitted"] == 0
    full = plans.run_plan(doc(ranks[:1024]))["ranks"]  # the first half has every kind
    for r, group in zip(out["ranks"], out["rank_groups"], strict=True):
        assert group["count"] == 64 and group["representative"] == out["ranks"].index(r)
        members = [i for a, b in group["index_ranges"] for i in range(a, b + 1)]
        assert r["index"] in members and len(members) == 64
        same = {k: v for k, v in full[members[0]].items() if k not in ("rank", "label", "index", "binding")}
        assert {k: v for k, v in r.items() if k not in ("rank", "label", "index", "binding")} == same
    dist = out["rank_distribution"]
    kvs = [r["kv_bytes"] for r in full]
    assert dist["kv_bytes"]["min"] == min(kvs) and dist["kv_bytes"]["max"] == max(kvs)
    assert sum(dist["kv_bytes_histogram"]["counts"]) == 2048
    binding = [r for r in out["ranks"] if r["binding"]]
    assert len(binding) == 1 and binding[0]["rank"] == out["binding_rank"] == str(out["binding_index"])


def test_identical_ranks_answer_in_two_kilobytes_per_group() -> None:
    out = plans.run_plan(doc([rank() for _ in range(4096)]))
    assert out["ranks_form"] == "grouped" and len(out["rank_groups"]) == 1
    assert out["rank_groups"][0]["ranks"] == "0–4095" and out["rank_groups"][0]["count"] == 4096
    assert len(json.dumps(out)) < 40_000


def test_distinct_ranks_list_at_most_max_groups_the_least_kv_first() -> None:
    ranks = [rank(weights=35 * GIB + i * 4096) for i in range(2048)]  # every rank differs
    out = plans.run_plan(doc(ranks))
    assert len(out["rank_groups"]) == rank_groups.MAX_GROUPS
    assert out["rank_groups_omitted"] == 2048 - rank_groups.MAX_GROUPS
    kept = [r["index"] for r in out["ranks"]]
    assert kept == sorted(kept) and kept == list(range(2048 - rank_groups.MAX_GROUPS, 2048))  # most weights, least KV
    assert out["binding_rank"] == "2047" and out["ranks"][-1]["binding"]
    assert len(out["uniform_budget"]["ranks"]) == rank_groups.MAX_GROUPS


def test_warnings_on_every_rank_are_bounded_and_grouped() -> None:
    ranks = [rank(free=60 * GIB) for _ in range(4096)]  # every rank: free below requested
    out = plans.run_plan(doc(ranks))
    assert len(out["warnings"]) == 256 and out["warnings_omitted"] > 0
    group = next(g for g in out["warning_groups"] if g["code"] == "free_below_requested")
    assert group["count"] == 4096 and len(group["ranks"]) == 1024 and group["ranks_omitted"] == 3072
    assert group["message"].startswith("ranks 0–4095: will not start")


def test_more_ranks_than_the_stated_limit_are_refused_by_name() -> None:
    with pytest.raises(InputError) as err:
        plans.run_plan(doc([{"total": "80 GiB"}] * 131_080))
    assert err.value.field == "ranks"
    assert err.value.message == "ranks is too long (131,080 items): give at most 131,072 items"


def test_the_csv_of_a_grouped_plan_says_what_each_row_stands_for() -> None:
    from app.core.exports import ledger_csv

    ranks = [rank(free=79 * GIB - (i % 2) * 2**22) for i in range(2048)]
    lines = ledger_csv(plans.run_plan(doc(ranks))).splitlines()
    assert lines[0].endswith(",group_count,group_ranks") and len(lines) == 3
    assert {line.split(",", 1)[0] for line in lines[1:]} == {"0", "1"}
    assert all(",1024," in line for line in lines[1:])
    small = ledger_csv(plans.run_plan(doc(ranks[:16]))).splitlines()
    assert "group_count" not in small[0] and len(small) == 17


@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=3000))
def test_histogram_counts_each_value_in_its_bin_as_the_plain_loop_does(values: list[int]) -> None:
    low, high = min(values), max(values)
    bins = max(1, min(40, math.ceil(math.sqrt(len(values))))) if high > low else 1
    counts = [0] * bins
    for v in values:  # the definition: equal bins from low to high, the last one holding the max
        counts[min(int((v - low) * (bins / (high - low))), bins - 1) if bins > 1 else 0] += 1
    assert rank_groups.histogram(values) == {"low_bytes": low, "high_bytes": high, "counts": counts}

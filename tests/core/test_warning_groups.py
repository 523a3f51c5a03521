"""Issue 17 item 14: identical warnings across ranks are said once ("ranks TP0–TP7: …"); the
per-rank `warnings` list stays as it was (the JSON contract), `warning_groups` is added."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.core.units import fmt_bytes
from app.core.warning_groups import group_warnings, rank_span
from app.services import plans


def test_eight_identical_rank_warnings_are_one_group_and_the_list_keeps_all_eight() -> None:
    doc = {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"total": "80GiB"}, "layout": {"tp": 8},
           "engine": {"kv_cache_memory_bytes": "1TiB"}}
    out = plans.run_plan(doc, with_levers=False)
    per_rank = [w for w in out["warnings"] if w["code"] == "manual_does_not_fit"]
    assert [w["rank"] for w in per_rank] == [f"TP{i}" for i in range(8)]  # unchanged contract
    (group,) = [g for g in out["warning_groups"] if g["code"] == "manual_does_not_fit"]
    assert group["count"] == 8 and group["ranks"] == [f"TP{i}" for i in range(8)]
    assert group["message"].startswith("ranks TP0–TP7: will not fit --kv-cache-memory-bytes 1099511627776")
    assert group["message"].removeprefix("ranks TP0–TP7: ") == per_rank[0]["message"].removeprefix("rank TP0 ")


def test_different_messages_stay_apart_and_a_single_rank_keeps_its_words() -> None:
    warnings: list[dict[str, str | None]] = [
        {"code": "no_kv_memory", "message": "rank 0 will not start: no memory left (-1.00 GiB)", "rank": "0"},
        {"code": "no_kv_memory", "message": "rank 1 will not start: no memory left (-2.00 GiB)", "rank": "1"},
        {"code": "rank_outlier", "message": "rank 10: CUDA graphs exceed the headroom", "rank": "10"},
        {"code": "estimated_rows", "message": "rows are estimates", "rank": None},
    ]
    groups = group_warnings(warnings)
    assert [g["message"] for g in groups] == [w["message"] for w in warnings]
    assert [g["count"] for g in groups] == [1, 1, 1, 1]


def test_a_label_inside_another_label_is_not_taken_for_it() -> None:
    warnings = [{"code": "x", "message": f"rank {r}: same, unlike rank 10", "rank": r} for r in ("1", "2", "3")]
    (group,) = group_warnings(warnings)
    assert group["message"] == "ranks 1–3: same, unlike rank 10"


def test_rank_spans() -> None:
    assert rank_span(["0", "1", "2", "3", "4", "5", "6", "7"]) == "0–7"
    assert rank_span(["TP0", "TP1"]) == "TP0, TP1"
    assert rank_span(["TP0", "TP2", "TP3"]) == "TP0, TP2, TP3"
    assert rank_span([f"pid={p}" for p in (5, 9, 11, 40, 41)]) == "pid=5, pid=9, pid=11, pid=40, … (5 ranks)"


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"]),
                          st.one_of(st.none(), st.integers(0, 20).map(str))), max_size=40))
def test_every_warning_is_in_exactly_one_group(items: list[tuple[str, str, str | None]]) -> None:
    warnings = [{"code": c, "message": f"rank {r} says {m}" if r else m, "rank": r} for c, m, r in items]
    groups = group_warnings(warnings)
    # independently: a group per (code, words without the rank), holding each distinct rank once
    expected: dict[tuple[str, str], list[str]] = {}
    for c, m, r in items:
        ranks = expected.setdefault((c, f"says {m}" if r else m), [])
        if r is not None and r not in ranks:
            ranks.append(r)
    assert [(g["code"], g["ranks"]) for g in groups] == [(c, r) for (c, _), r in expected.items()]
    for g, ((_, words), ranks) in zip(groups, expected.items(), strict=True):
        assert g["message"].endswith(words) and g["count"] == max(1, len(ranks))
        assert g["message"].startswith("ranks ") == (len(ranks) > 1)


def _outlier_plan(n: int) -> dict[str, object]:
    """Distinct measured ranks whose KV spreads far from the median at a low utilization."""
    gib, mib = 2**30, 2**20
    ranks = [{"label": f"n{i // 8}-gpu{i % 8}", "total": 80 * gib, "free_at_start": 79 * gib,
              "weights": 35 * gib + (i * 7919) % 997 * mib // 8, "non_torch": gib, "cuda_graphs": gib // 2,
              "activation": 3 * gib + i * 64 * mib} for i in range(n)]  # fmt: skip
    return {"model": {"kv_bytes_per_token": 327_680}, "layout": {"tp": 8, "dp": n // 8},
            "engine": {"gpu_memory_utilization": 0.55, "max_model_len": 8192}, "ranks": ranks}


def test_kv_outliers_are_one_group_per_side_with_their_range_and_the_list_keeps_each() -> None:
    out = plans.run_plan(_outlier_plan(96), with_levers=False)
    per_rank = [w for w in out["warnings"] if w["code"] == "rank_outlier"]
    groups = [g for g in out["warning_groups"] if g["code"] == "rank_outlier"]
    assert len(per_rank) > 10 and 1 <= len(groups) <= 2  # below and above the median at most
    assert sum(g["count"] for g in groups) == len(per_rank)
    assert sorted(label for g in groups for label in g["ranks"]) == sorted(w["rank"] for w in per_rank)
    kv = {r["rank"]: r["kv_bytes"] for r in out["ranks"]}
    for g in groups:
        least = min(g["ranks"], key=kv.__getitem__)
        most = max(reversed(g["ranks"]), key=kv.__getitem__)
        side = "below" if kv[least] < out["rank_distribution"]["kv_bytes"]["median"] else "above"
        assert f"far {side} the median" in g["message"]
        assert f"(the least: rank {least}, {fmt_bytes(kv[least])}; the most: rank {most}, {fmt_bytes(kv[most])})" \
            in g["message"]
        assert all(kv[least] <= kv[label] <= kv[most] for label in g["ranks"])


@given(st.lists(st.integers(-2**34, 2**37), min_size=2, max_size=60), st.integers(2**30, 2**36))
def test_outlier_groups_cover_every_warning_once_with_the_true_ends(kvs: list[int], median: int) -> None:
    warnings = [{"code": "rank_outlier", "rank": f"r{i}",
                 "message": f"rank r{i} has {fmt_bytes(kv)} of KV, far from the median {fmt_bytes(median)}"}
                for i, kv in enumerate(kvs)]  # fmt: skip
    groups = group_warnings(warnings)
    assert sum(g["count"] for g in groups) == len(kvs) and len(groups) <= 2
    assert sorted(label for g in groups for label in g["ranks"]) == sorted(w["rank"] for w in warnings)
    for g in groups:
        if g["count"] == 1:  # a lone rank keeps its own words
            assert g["message"] == next(w["message"] for w in warnings if w["rank"] == g["ranks"][0])
            continue
        shown = [kvs[int(label[1:])] for label in g["ranks"]]
        assert f"{fmt_bytes(min(shown))} to {fmt_bytes(max(shown))} of KV" in g["message"]

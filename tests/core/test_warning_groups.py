"""Issue 17 item 14: identical warnings across ranks are said once ("ranks TP0–TP7: …"); the
per-rank `warnings` list stays as it was (the JSON contract), `warning_groups` is added."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

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

"""The page's binding / median / largest-KV ranks as the core picks them (`rank_distribution.
representative_indexes`, from its sorted KV column) are the ranks the page's own pick finds in the
rank JSON (`charts.representative_ranks`), on random distinct-rank plans; a result without the key
(saved before it existed) is picked on the page as before."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.plan import compute, with_columns
from app.core.report import result_to_dict
from app.web.plan import charts
from tests.core.test_rank_columns import _one_total_plan, _plan


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32), st.integers(1, 1024), st.booleans())
def test_core_representatives_are_the_pages_pick(seed: int, n: int, one_total: bool) -> None:
    plan = with_columns((_one_total_plan if one_total else _plan)(seed, n))
    result = result_to_dict(compute(plan), [])
    ranks = result["ranks"]
    want = charts.representative_ranks(ranks, result["binding_rank"])
    got = charts.representatives_of(result, ranks)
    assert result["rank_distribution"]["representative_indexes"] is not None
    assert len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))
    old = {**result, "rank_distribution": {k: v for k, v in result["rank_distribution"].items()
                                           if k != "representative_indexes"}}  # fmt: skip
    assert all(a is b for a, b in zip(charts.representatives_of(old, ranks), want, strict=True))

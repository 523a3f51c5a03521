"""vLLM's null block (item 23 of issue 17): one block of the pool never serves a request.

The oracle is written here from vLLM's rule, not from the code under test: ``BlockPool`` pops one
block as its null block (vllm/v1/core/block_pool.py), so a ``max_model_len`` request of
``ceil(mml / bs)`` blocks needs ``ceil(mml / bs) + 1`` blocks in the pool. PR #47272 makes the
start-up check refuse a pool without that extra block (release 0.28.0, app.core.versions); before,
vLLM starts and the request waits forever.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from app.core.ledger import Cell, RankInput
from app.core.plan import Engine, Layout, ModelInput, PlanInput, Policy, compute
from app.core.versions import NULL_BLOCK_CHECK_SINCE, rules_for

BPT = 1000  # KV bytes per token per rank
BS = 16
PAGE = BPT * BS


def plan(kv_bytes: int, max_model_len: int, version: str, ranks: int = 1) -> PlanInput:
    rows = tuple(RankInput(str(i), kv_room=Cell(kv_bytes, "measured")) for i in range(ranks))
    engine = Engine(0.9, "auto", BS, max_model_len, 8192, 256)
    return PlanInput(ModelInput(kv_bytes_per_token=BPT), Layout(tp=ranks), engine, Policy(), rows, version)


def test_release_that_reserves_the_block() -> None:
    assert NULL_BLOCK_CHECK_SINCE == (0, 28, 0)
    assert not rules_for("0.27.1").null_block_in_check
    assert rules_for("0.28.0").null_block_in_check
    assert rules_for("0.29.1").null_block_in_check
    assert not rules_for("0.8.2").null_block_exists


def test_exactly_one_request_is_refused_from_028() -> None:
    # 8192 tokens = 512 blocks; a pool of exactly 512 blocks leaves 511 for requests.
    result = compute(plan(512 * PAGE, 8192, "0.28.0"))
    adm = result.admission
    assert adm.blocks == 512 and adm.per_request_blocks == 512
    assert not adm.fits_max_model_len
    assert adm.largest_max_model_len == 511 * BS  # one block lower than without the null block
    codes = [w.code for w in result.warnings]
    assert "max_model_len_does_not_fit" in codes
    msg = next(w.message for w in result.warnings if w.code == "max_model_len_does_not_fit")
    assert "null block" in msg


def test_before_028_it_starts_and_the_page_says_the_request_would_hang() -> None:
    result = compute(plan(512 * PAGE, 8192, "0.27.1"))
    adm = result.admission
    assert adm.fits_max_model_len  # vLLM 0.27.1's start-up check passes
    assert not adm.servable_max_model_len
    assert adm.largest_max_model_len == 512 * BS  # vLLM's own estimate at that release
    hang = next(w for w in result.warnings if w.code == "null_block_hang")
    assert "511 of 512" in hang.message and f"{511 * BS:,}" in hang.message


def test_one_block_more_starts_everywhere() -> None:
    for version in ("0.27.1", "0.28.0"):
        adm = compute(plan(513 * PAGE, 8192, version)).admission
        assert adm.fits_max_model_len and adm.servable_max_model_len


@given(st.integers(0, 4000 * PAGE), st.integers(1, 40_000), st.integers(1, 4))
def test_start_up_check_matches_the_rule(kv: int, mml: int, ranks: int) -> None:
    blocks = kv // PAGE
    need = math.ceil(mml / BS)
    new = compute(plan(kv, mml, "0.28.0", ranks)).admission
    old = compute(plan(kv, mml, "0.27.1", ranks)).admission
    assert new.fits_max_model_len == (blocks - 1 >= need)
    assert old.fits_max_model_len == (blocks >= need)
    assert new.usable_blocks == old.usable_blocks == max(0, blocks - 1)
    assert new.largest_max_model_len == max(0, blocks - 1) * BS
    assert new.servable_max_model_len == new.fits_max_model_len

"""Issue 17 item 24: async scheduling's larger sliding-window bound per request (app.core.in_flight).

The referee numbers are vLLM issue #54703's (2026-09-01), reproduced there "exactly through vLLM's
own get_kv_cache_configs / get_kv_cache_capacity": with async scheduling and 16,384 batched tokens a
window-4 group of block size 4 charges 8,194 blocks per request, a window-512 group (block 32) 1,041.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.in_flight import concurrent_batches, default_async_scheduling
from app.core.kvrank import KVGroup, cdiv
from app.core.kvspec import rank_kv
from app.core.model_config import shape_from_config
from app.ingest.catalogue import get_model
from app.ingest.vllm_serve import read_serve
from app.services.plans import run_plan

MNBT = 16_384
LONG = 1_048_576


@pytest.mark.parametrize(("window", "block", "blocks"), [(4, 4, 8_194), (512, 32, 1_041)])
def test_vllm_issue_54703_in_flight_admission_reserve(window: int, block: int, blocks: int) -> None:
    group = KVGroup("sliding", 1, 1, block, sliding_window=window)
    batches = concurrent_batches((0, 27, 1), pp=1, async_on=True)
    assert batches == 2
    assert group.blocks_per_request(LONG, MNBT, 1, batches) == blocks
    # vLLM before 0.26: one batch beside the window (kv_cache_interface.py @28be48fa9)
    assert group.blocks_per_request(LONG, MNBT) == cdiv(window - 1 + MNBT, block) + 1


def test_chunked_local_groups_hold_the_batches_in_flight_too() -> None:
    group = KVGroup("chunked", 1, 1, 16, attention_chunk_size=8_192)
    assert group.blocks_per_request(LONG, 8_192, 1, 2) == cdiv(8_192 + 2 * 8_192, 16)
    assert group.blocks_per_request(4_096, 8_192, 1, 2) == cdiv(4_096, 16)  # never more than max_model_len


@pytest.mark.parametrize(("version", "pp", "async_on", "batches"), [
    ((0, 25, 9), 1, True, 1), ((0, 26, 0), 1, True, 2), ((0, 27, 1), 1, False, 1),
    ((0, 27, 1), 4, True, 4), ((0, 27, 1), 2, False, 2),
])  # fmt: skip
def test_max_concurrent_batches_as_vllms_executors(version: tuple[int, int, int], pp: int, async_on: bool,
                                                   batches: int) -> None:
    assert concurrent_batches(version, pp, async_on) == batches


def test_async_scheduling_default_by_version_and_draft() -> None:
    assert not default_async_scheduling((0, 13, 0))
    assert default_async_scheduling((0, 14, 0)) and default_async_scheduling((0, 27, 1), "eagle3")
    assert not default_async_scheduling((0, 27, 1), "draft_model")
    assert not default_async_scheduling((0, 27, 1), "ngram")


def _gemma(mml: int, **engine: Any) -> dict[str, Any]:
    return {"model": {"catalogue": "gemma-3-27b-it"}, "gpu": {"name": "H100 80GB"},
            "engine": {"max_model_len": mml, **engine}}  # fmt: skip


def _expected_blocks(mml: int, mnbt: int, batches: int) -> int:
    """Σ over the rank's KV groups of vLLM's per-request bound, written out here."""
    entry = get_model("gemma-3-27b-it")
    assert entry is not None
    total = 0
    for g in rank_kv(shape_from_config(dict(entry.config))).groups:
        if g.kind == "sliding":
            assert g.sliding_window is not None
            total += cdiv(min(g.sliding_window - 1 + batches * mnbt, mml), g.block_size) + 1
        else:
            total += cdiv(mml, g.block_size)
    return total


@pytest.mark.parametrize(("version", "given", "batches"), [
    ("0.27.1", None, 2), ("0.27.1", False, 1), ("0.25.0", None, 1), ("0.27.1", True, 2),
])  # fmt: skip
def test_a_sliding_window_plan_charges_the_in_flight_batches(version: str, given: bool | None, batches: int) -> None:
    engine: dict[str, Any] = {} if given is None else {"async_scheduling": given}
    plan = run_plan({**_gemma(32_768, **engine), "vllm_version": version}, with_levers=False)
    mnbt = plan["engine"]["max_num_batched_tokens"]
    assert plan["in_flight_batches"] == batches
    assert plan["per_request_blocks"] == _expected_blocks(32_768, mnbt, batches)
    assert plan["max_concurrency_at_max_model_len"] == pytest.approx(plan["blocks"] / plan["per_request_blocks"],
                                                                     abs=1e-4)


def test_full_attention_models_are_unchanged() -> None:
    doc: dict[str, Any] = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}}
    on, off = (run_plan({**doc, "engine": {"max_model_len": 32_768, "async_scheduling": v}}, with_levers=False)
               for v in (True, False))  # fmt: skip
    assert on["in_flight_batches"] == off["in_flight_batches"] == 1
    assert on["per_request_blocks"] == off["per_request_blocks"] == cdiv(32_768, 16)


@settings(max_examples=15, deadline=None)
@given(mml=st.sampled_from([4_096, 32_768, 131_072]), mnbt=st.sampled_from([2_048, 8_192, 16_384]))
def test_async_scheduling_never_raises_concurrency(mml: int, mnbt: int) -> None:
    on, off = (run_plan(_gemma(mml, max_num_batched_tokens=mnbt, async_scheduling=v), with_levers=False)
               for v in (True, False))  # fmt: skip
    assert on["per_request_blocks"] >= off["per_request_blocks"]
    assert on["max_concurrency_at_max_model_len"] <= off["max_concurrency_at_max_model_len"]


def test_the_flag_is_written_against_the_default_and_read_back() -> None:
    default = run_plan(_gemma(32_768), with_levers=False)
    assert not any("async-scheduling" in f for f in default["flags"])
    off = run_plan(_gemma(32_768, async_scheduling=False), with_levers=False)
    assert "--no-async-scheduling" in off["flags"]
    reading = read_serve("vllm serve google/gemma-3-27b-it --max-model-len 32768 --no-async-scheduling")
    assert reading.document()["engine"]["async_scheduling"] is False
    assert any("max_in_flight_tokens" in note for note in default["notes"])

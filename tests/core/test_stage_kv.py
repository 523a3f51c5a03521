"""Each rank's blocks from its own PP stage's layers (app.core.stage_kv, app.core.admission).

vLLM sizes every worker from its own layers and takes the minimum block count over workers
(vllm/v1/core/kv_cache_utils.py ``get_kv_cache_configs`` @4dd49b06f); the plan used the page of
the stage with the most layers for every rank and bound the rank with the least KV.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.admission import AdmissionPolicy, admit_columns
from app.core.kvspec import rank_kv, rank_kv_stages
from app.core.model_config import shape_from_config
from app.core.plan import compute, kv_spec
from app.core.stage_kv import rank_stage_kv, stage_positions
from app.ingest.catalogue import get_model
from app.services import plan_inputs

POLICY = AdmissionPolicy(max_model_len=8192, max_num_batched_tokens=8192, max_num_seqs=256, growth_reserve=0.0,
                         avg_live_tokens=None)  # fmt: skip


def _doc(model: str, tp: int, pp: int) -> dict[str, object]:
    return {"model": {"catalogue": model}, "gpu": {"name": "H100 80GB"}, "layout": {"tp": tp, "pp": pp},
            "engine": {"max_model_len": 8192}, "vllm_version": "0.19.0"}  # fmt: skip


@pytest.mark.parametrize("model", ["Llama-3.1-8B", "Qwen3-8B", "Qwen3-32B", "gpt-oss-120b"])
@pytest.mark.parametrize("pp", [1, 2, 4])
def test_equal_stages_change_nothing(model: str, pp: int) -> None:
    """Layers dividing evenly: the plan's admission is the one-geometry admission of before (a
    `compute` given the spec keeps every rank on it) and the per-stage path on equal stages agrees."""
    plan = plan_inputs.plan_input(_doc(model, 1, pp))
    result, before = compute(plan), compute(plan, kv_spec(plan))
    labels, kvs = [lg.label for lg in result.ledgers], [lg.kv.bytes for lg in result.ledgers]
    forced = admit_columns(labels, kvs, result.rkv, POLICY, stage_kv=[result.rkv] * len(kvs))
    assert replace(result.admission, ranks=()) == replace(before.admission, ranks=())
    assert forced.binding_spec is result.rkv
    assert forced == replace(admit_columns(labels, kvs, result.rkv, POLICY), ranks=forced.ranks,
                             stranded_bytes=forced.stranded_bytes, binding_spec=result.rkv)  # fmt: skip
    assert forced.stranded_bytes == before.admission.stranded_bytes
    for adm in (result.admission, forced):
        assert [(r.label, r.blocks, r.tokens, r.raw_tokens, r.stranded_bytes, r.binding) for r in adm.ranks] == [
            (r.label, r.blocks, r.tokens, r.raw_tokens, r.stranded_bytes, r.binding) for r in before.admission.ranks
        ]


def test_qwen3_235b_pp4_by_hand() -> None:
    """94 layers at PP4: get_pp_indices gives 23/24/24/23 (vllm/distributed/utils.py, the remainder to
    the stages before the last); TP4 holds 1 of 4 KV heads, bf16, head_dim 128, block 16: a page is
    16 × 2 × 128 × 2 = 8,192 B per layer. Blocks_i = kv_i // (8,192 × layers of its stage)."""
    plan = plan_inputs.plan_input(_doc("Qwen3-235B-A22B", 4, 4))
    result = compute(plan)
    kvs = [lg.kv.bytes for lg in result.ledgers]
    assert len(kvs) == 16
    layers = [23, 24, 24, 23]
    blocks = [kv // (8192 * layers[i // 4]) for i, kv in enumerate(kvs)]
    at = min(range(16), key=lambda i: (blocks[i], kvs[i]))
    adm = result.admission
    assert [r.blocks for r in adm.ranks] == blocks
    assert adm.blocks == min(blocks) and adm.tokens == min(blocks) * 16
    assert adm.binding_rank == result.ledgers[at].label
    assert adm.per_request_bytes == 8192 // 16 * 8192 * layers[at // 4]  # 512 blocks of the binding stage's page


def test_positions_map_to_stages() -> None:
    assert stage_positions(["a"] * 8, 2, 2) == [0, 0, 1, 1, 0, 0, 1, 1]  # two replicas, stage-major
    assert stage_positions(["rank=3", "rank=0"], 2, 2) == [1, 0]  # partial: the worker rank in the label
    assert stage_positions(["rank=2", "rank=3", "rank=0", "rank=1"], 2, 2) == [1, 1, 0, 0]  # labels over order
    assert stage_positions(["x", "y"], 2, 2) is None
    assert stage_positions(["PP1_TP0", "PP0_TP0"], 2, 2) is None  # not a worker rank
    assert stage_positions(["a", "b"], 2, 2, (0, 1)) == [0, 1]  # one rank per stage (sizing)


SHAPE = shape_from_config(get_model("Qwen3-235B-A22B").config_dict())
STAGES = rank_kv_stages(SHAPE, tp=4, pp=4)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40 << 30), min_size=4, max_size=4), st.integers(0, 3), st.integers(1, 8 << 30))
def test_tokens_never_fall_when_a_stage_gets_more_kv(kvs: list[int], stage: int, more: int) -> None:
    labels = ["0", "1", "2", "3"]
    per = rank_stage_kv(STAGES, labels, 4, 4, (0, 1, 2, 3))
    assert per is not None
    tight = rank_kv(SHAPE, tp=4, pp=4)
    before = admit_columns(labels, kvs, tight, POLICY, stage_kv=per)
    grown = [kv + more if i == stage else kv for i, kv in enumerate(kvs)]
    after = admit_columns(labels, grown, tight, POLICY, stage_kv=per)
    assert after.tokens >= before.tokens and after.blocks >= before.blocks
    assert before.blocks == min(s.blocks_for(kv) for s, kv in zip(per, kvs, strict=True))
    # never below the old rule (every rank on the most-layer page)
    assert before.tokens >= admit_columns(labels, kvs, tight, POLICY).tokens
    assert before.fits_max_model_len == all(s.fits(kv, 8192, 8192) for s, kv in zip(per, kvs, strict=True))


def test_explain_shows_the_binding_stage_s_divisor() -> None:
    """A 23-layer stage binding: the blocks formula divides by its 23 layers, not the tight stage's 24."""
    from app.core.explain import explain

    result = compute(plan_inputs.plan_input(_doc("Qwen3-235B-A22B", 4, 4)))
    labels = [lg.label for lg in result.ledgers]
    per = rank_stage_kv(STAGES, labels, 4, 4)
    assert per is not None
    kvs = [8192 * 23 * 1000] * 4 + [8192 * 24 * 2000] * 12  # stage 0: 1,000 blocks, the others 2,000
    adm = admit_columns(labels, kvs, result.rkv, POLICY, stage_kv=per)
    assert adm.blocks == 1000 and adm.binding_rank == labels[0] and adm.binding_spec is per[0]
    blocks = explain(replace(result, admission=adm))["blocks"]
    assert blocks["values"] == f"max(0, {8192 * 23 * 1000:,} // 8,192 // 23)" and blocks["result"] == "1,000"

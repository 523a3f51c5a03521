"""DP attention + EP for MoE (issue 15 item 5) against vLLM's rules.

``FusedMoEParallelConfig.make`` (vllm/model_executor/layers/fused_moe/config.py @28be48fa): the
experts' TP size is tp × dp (``flatten_tp_across_dp_and_pcp``); with --enable-expert-parallel and
tp × dp > 1 it becomes the EP size and the experts' TP is 1. ``determine_expert_map``: E // ep
experts per rank, one more on the first E % ep ranks. KV is sharded by each engine's TP only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.dp_layout import DPLayout
from app.core.errors import InputError
from app.services.evidence import parse_log_text
from app.services.plans import run_plan
from tests.core.test_explain_identities import _check

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"


# The six examples of FusedMoEParallelConfig.make's docstring: (tp, dp, ep flag) → (moe tp, ep size).
@pytest.mark.parametrize(("tp", "dp", "ep", "moe_tp", "ep_size"), [
    (2, 1, False, 2, 1), (1, 2, False, 2, 1), (2, 2, False, 4, 1),
    (2, 1, True, 1, 2), (1, 2, True, 1, 2), (2, 2, True, 1, 4), (1, 1, True, 1, 1),
])  # fmt: skip
def test_vllms_moe_parallel_config(tp: int, dp: int, ep: bool, moe_tp: int, ep_size: int) -> None:
    lay = DPLayout(dp, tp, 1, ep, 64)
    assert (lay.moe_tp_size, lay.ep_size) == (moe_tp, ep_size)


@given(experts=st.integers(1, 512), tp=st.integers(1, 16), dp=st.integers(1, 16))
def test_expert_map_conserves_the_experts(experts: int, tp: int, dp: int) -> None:
    lay = DPLayout(dp, tp, 1, True, experts)
    counts = [lay.experts_on(r) or 0 for r in range(lay.ep_size)]
    assert sum(counts) == experts
    assert max(counts) - min(counts) <= (1 if lay.ep_size > 1 else 0)
    # vLLM: base = E // ep, the first E % ep ranks hold one more.
    base, extra = divmod(experts, lay.ep_size)
    assert counts == [base + (r < extra) for r in range(lay.ep_size)]


def _plan(layout: dict[str, Any], model: str = "mixtral-8x7b-v0.1", **extra: Any) -> dict[str, Any]:
    return {"model": {"catalogue": model}, "gpu": {"name": "H100"}, "layout": layout,
            "policy": {"avg_live_tokens": 4000}, **extra}


def test_dp_shards_experts_over_dp_times_tp_and_kv_over_tp_only() -> None:
    tp2 = run_plan(_plan({"tp": 2}), with_levers=False)
    dp4 = run_plan(_plan({"tp": 2, "dp": 4}), with_levers=False)
    ep8 = run_plan(_plan({"tp": 2, "dp": 4, "enable_expert_parallel": True}), with_levers=False)
    # Mixtral-8x7B: 32 layers × 8 experts × (w13 2 × 14336 × 4096 + w2 4096 × 14336) bf16.
    experts = 32 * 8 * 3 * 14336 * 4096 * 2
    w = [r["ranks"][0]["weights_bytes"] for r in (tp2, dp4, ep8)]
    assert w[0] - w[2] == experts // 2 - experts // 8  # attention stays at TP2, each GPU one expert of 8
    # Without EP vLLM splits the experts' matrices over tp × dp = 8 too: the same bytes as one expert
    # of 8 per GPU (Mixtral's intermediate 14336 divides by 8), attention still over TP2.
    assert w[1] == w[2] and not any("overstate" in n for n in dp4["notes"])
    assert tp2["kv_bytes_per_token"] == dp4["kv_bytes_per_token"] == 32 * 2 * (8 // 2) * 128 * 2
    assert dp4["dp_layout"]["moe_tp_size"] == 8 and ep8["dp_layout"]["ep_size"] == 8
    assert ep8["dp_layout"]["experts_per_rank_max"] == 1
    assert ep8["dp_layout"]["concurrency_all_engines"] == ep8["concurrency"] * 4
    assert "--data-parallel-size 4" in ep8["flags"] and "--enable-expert-parallel" in ep8["flags"]
    assert ep8["layout"]["enable_expert_parallel"] is True and ep8["layout"]["dp"] == 4
    for result in (dp4, ep8):
        for key, entry in result["explain"].items():
            if key.startswith("dp_layout."):
                _check(key, entry)


def test_qwen3_30b_a3b_tp2_dp2_without_ep_by_hand() -> None:
    """Qwen3-30B-A3B (config: 48 layers, hidden 2048, 128 experts, moe_intermediate 768, bf16): the
    expert matrices per layer are 128 × (w13 2 × 768 × 2048 + w2 2048 × 768) × 2 B; at TP2 × DP2
    without EP vLLM splits them over 4 GPUs, everything else (attention, router, norms, embedding,
    LM head, rotary cache) over TP2 exactly as in the TP2 engine alone."""
    tp2 = run_plan(_plan({"tp": 2}, "qwen3-30b-a3b"), with_levers=False)
    dp2 = run_plan(_plan({"tp": 2, "dp": 2}, "qwen3-30b-a3b"), with_levers=False)
    experts = 48 * 128 * 3 * 768 * 2048 * 2
    rest = tp2["ranks"][0]["weights_bytes"] - experts // 2  # the TP2 rank: experts / 2 + the rest / 2
    assert dp2["ranks"][0]["weights_bytes"] == experts // (2 * 2) + rest
    assert all(r["weights_bytes"] == dp2["ranks"][0]["weights_bytes"] for r in dp2["ranks"])
    assert dp2["kv_bytes_per_token"] == tp2["kv_bytes_per_token"]  # KV is per DP engine, over TP only
    assert dp2["tokens"] > tp2["tokens"]


@given(tp=st.sampled_from([1, 2, 4]), dp=st.integers(1, 6), more=st.integers(1, 6),
       model=st.sampled_from(["mixtral-8x7b-v0.1", "qwen3-30b-a3b", "llama-3.1-8b"]))  # fmt: skip
def test_more_dp_never_raises_the_weights_per_rank_without_ep(tp: int, dp: int, more: int, model: str) -> None:
    def weights(d: int) -> list[int]:
        result = run_plan(_plan({"tp": tp, "dp": d}, model), with_levers=False)
        return [r["weights_bytes"] for r in result["ranks"]]

    fewer, larger = weights(dp), weights(dp + more)
    assert all(b <= a for a, b in zip(fewer, larger, strict=True))
    if model == "llama-3.1-8b":
        assert fewer == larger  # dense: DP replicates the whole engine


def test_uneven_experts_make_ep_rank_0_the_binding_rank() -> None:
    # Qwen3-235B-A22B: 128 experts over EP 6 (dp 3 × tp 2): 22 on EP ranks 0, 1, 21 on the others.
    result = run_plan(_plan({"tp": 2, "dp": 3, "expert_parallel": True}, "qwen3-235b-a22b-fp8"), with_levers=False)
    lay = result["dp_layout"]
    assert (lay["ep_size"], lay["experts_per_rank_max"], lay["experts_per_rank_min"]) == (6, 22, 21)
    assert result["binding_rank"] == "TP0"


@pytest.mark.parametrize(("layout", "version", "field", "pr"), [
    ({"tp": 1, "dp": 2}, "0.8.2", "layout.dp", "#13923"),
    ({"tp": 2, "expert_parallel": True}, "0.7.3", "layout.expert_parallel", "#14305"),
])  # fmt: skip
def test_flags_older_vllm_refuses(layout: dict[str, Any], version: str, field: str, pr: str) -> None:
    with pytest.raises(InputError) as err:
        run_plan(_plan(layout, vllm_version=version), with_levers=False)
    assert err.value.field == field and pr in err.value.message


def test_ep_on_a_dense_model_is_noted() -> None:
    result = run_plan(_plan({"tp": 2, "expert_parallel": True}, "llama-3.1-8b"), with_levers=False)
    assert any("without MoE layers" in n for n in result["notes"])
    assert result["dp_layout"]["ep_size"] == 1


@pytest.mark.parametrize(("name", "tp", "dp_at_least"), [
    ("public/13-v021plus-qwen38-2t-nvfp4-gb300-dp4-tp2-ep-cg-fail.log", 2, 2),
    ("public/33-v021-mimo-v25-sm12x-dp2-tp4-ep-util-advice.log", 4, 2),
])  # fmt: skip
def test_dp_ep_logs_import_with_dp_recorded(name: str, tp: int, dp_at_least: int) -> None:
    run = parse_log_text((LOGS / name).read_text())["runs"][0]
    assert run["layout"]["tp"]["value"] == tp and run["layout"]["dp"]["at_least"] == dp_at_least
    assert run["layout"]["ep"]["at_least"] or run["layout"]["ep"]["value"]


def test_an_ep_log_plans_with_its_flags_and_blocks() -> None:
    # tests/data/vllm-logs/14: Qwen3-235B-A22B-FP8, TP8 + EP on 8× L40S, vLLM 0.10.2; engine blocks 14,834.
    doc = {"from_log": {"text": (LOGS / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log").read_text()},
           "model": {"catalogue": "qwen3-235b-a22b-fp8"}}
    result = run_plan(doc, with_levers=False)
    assert result["layout"]["enable_expert_parallel"] is True and result["layout"]["tp"] == 8
    assert result["dp_layout"]["ep_size"] == 8 and result["dp_layout"]["experts_per_rank_max"] == 16
    assert "--enable-expert-parallel" in result["flags"]
    assert result["blocks"] == 14_834

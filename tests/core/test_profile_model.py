"""The term-by-term estimate of vLLM's profile run, against hand computations from vLLM's code
and against measured rows (real logs, vLLM PR #10511); properties of the terms."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.calibration import DEFAULT
from app.core.cudagraphs import capture_sizes, graph_terms
from app.core.estimates import (
    EstimateContext,
    activation_bytes,
    activation_for_stage,
    cuda_graph_bytes,
    estimate_ranks,
    non_torch_bytes,
)
from app.core.model_config import shape_from_config
from app.core.nontorch import non_torch_terms, snapshot_before_communicators
from app.core.profile_run import ActivationTerms, ProfileInputs, activation_terms, forward_per_token, padded_vocab
from app.core.shape import ModelShape
from app.core.versions import parse_version, rules_for, scheduler_defaults
from app.ingest.catalogue import get_model

GIB = 1024**3


def activation_for_stage_v(s: ModelShape, c: EstimateContext) -> ActivationTerms:
    return activation_for_stage(s, c, True)


def shape(slug: str) -> ModelShape:
    return shape_from_config(get_model(slug).config)


def ctx(version: str = "0.10.2", tp: int = 1, mnbt: int = 2048, seqs: int = 256, **kw: object) -> EstimateContext:
    return EstimateContext(tp, 1, mnbt, seqs, False, rules_for(version), **kw)  # type: ignore[arg-type]


def test_dense_forward_per_token_by_hand() -> None:
    # LlamaMLP: hidden + residual (2 × 4096) and gate_up (2 × 14336) + SiluAndMul out (14336), bf16
    llama = shape("llama-3.1-8b")
    assert forward_per_token(llama, 1) == (3 * 14336 * 2, 2 * 4096 * 2)
    assert forward_per_token(llama, 2) == (3 * 14336 // 2 * 2, 2 * 4096 * 2)
    # V0 (eager) holds one more hidden vector per token, and at TP > 1 the out-of-place all-reduce output
    assert forward_per_token(llama, 1, v1=False) == (3 * 14336 * 2, 3 * 4096 * 2)
    assert forward_per_token(llama, 2, v1=False) == (3 * 14336 // 2 * 2, 4 * 4096 * 2)


def test_moe_forward_per_token_by_hand() -> None:
    # fused_experts_impl: per token × top-k, cache13 = max(2N, hidden) and cache2 = N (N = I/TP, or I with EP)
    q = shape("qwen3-30b-a3b")  # hidden 2048, 128 experts, top-8, moe_intermediate 768
    sharded, unsharded = forward_per_token(q, 2)
    assert sharded == 8 * (max(2 * 384, 2048) + 384) * 2
    assert unsharded == (3 * 2048 + 128) * 2
    ep_sharded, ep_unsharded = forward_per_token(q, 2, ep=True)
    assert ep_sharded == 0 and ep_unsharded == (8 * (max(1536, 2048) + 768) + 3 * 2048 + 128) * 2


def test_v1_sampler_by_hand() -> None:
    # 256 rows × padded vocab (128256) × 38 B (the sort step with PyTorch's segmented-sort
    # temporaries, v0.7–v0.16) on the last stage only
    llama = shape("llama-3.1-8b")
    inp = ProfileInputs(tp=1, max_num_batched_tokens=2048, max_num_seqs=256, version=(0, 10, 2))
    terms = activation_terms(llama, inp)
    assert padded_vocab(128256) == 128256 and padded_vocab(151665) == 151680
    assert terms.sampler == 256 * 128256 * 38
    assert terms.peak == max(terms.forward, terms.hidden_out + terms.sampler)
    assert activation_terms(llama, replace(inp, last_stage=False)).sampler == 0
    assert activation_terms(llama, replace(inp, version=(0, 21, 0))).sampler == 256 * 128256 * 14
    # fewer than 128 rows take PyTorch's full-sort path (46 B); one row the large-segment path (30 B);
    # from v0.17 fewer than 8 rows still sort (the Triton kernel needs 8)
    assert activation_terms(llama, replace(inp, max_num_seqs=64)).sampler == 64 * 128256 * 46
    assert activation_terms(llama, replace(inp, max_num_seqs=1)).sampler == 128256 * 30
    assert activation_terms(llama, replace(inp, max_num_seqs=4, version=(0, 21, 0))).sampler == 4 * 128256 * 46
    # V0: the sort step too since PR #8619 (v0.6.2); the inverse-permutation resort (40 B) before it
    assert activation_terms(llama, replace(inp, v1=False, version=(0, 7, 1))).sampler == 256 * 128256 * 38
    assert activation_terms(llama, replace(inp, v1=False, version=(0, 6, 1))).sampler == 256 * 128256 * 40


def test_v1_sampler_against_logged_torch_peaks() -> None:
    # file 14 (v0.10.2, Qwen3-235B FP8, 256 rows) and public/28 (v0.10.0, 1,024 rows) log torch peak
    # increases of 1.40 and 5.62 GiB: the sampler dominates both (Qwen3 vocabulary 151,936)
    q = shape("qwen3-235b-a22b-fp8")
    for tp, tokens, seqs, ep, logged in ((8, 2048, 256, True, 1.40), (4, 8192, 1024, False, 5.62)):
        inp = ProfileInputs(tp=tp, max_num_batched_tokens=tokens, max_num_seqs=seqs, version=(0, 10, 2),
                            expert_parallel=ep)  # fmt: skip
        assert activation_terms(q, inp).peak / (logged * GIB) == pytest.approx(1, abs=0.03), logged


def test_v0_profile_matches_pr_10511() -> None:
    # vLLM PR #10511 (V0, Llama-3-8B, 8192 tokens, 256 sequences): 1.26 GiB peak at TP1 *and* TP2 —
    # the V0 sampler dominates and does not shard.
    llama = shape("llama-3.1-8b")
    for tp in (1, 2):
        peak = activation_bytes(llama, ctx("0.6.5", tp=tp, mnbt=8192, v1=False))
        assert abs(peak / (1.26 * GIB) - 1) < 0.05, tp


def test_v0_profile_matches_file_01() -> None:
    # tests/data/vllm-logs file 01 (v0.6.4, no chunked prefill): peak − weights = 17.06 − 14.99 and 17.98 − 14.99
    llama = shape("llama-3.1-8b")
    for tokens, logged in ((20000, 17.06 - 14.9888), (29000, 17.98 - 14.9888)):
        peak = activation_bytes(llama, ctx("0.6.4", mnbt=tokens, v1=False))
        assert abs(peak / (logged * GIB) - 1) < 0.02, tokens


def test_scheduler_defaults_by_version_and_card() -> None:
    v = parse_version
    assert scheduler_defaults(v("0.10.2"), True, round(139.81 * GIB), "H200", 262144)[:2] == (8192, 1024)
    assert scheduler_defaults(v("0.10.2"), True, round(44.42 * GIB), "L40S", 32768)[:2] == (2048, 256)
    assert scheduler_defaults(v("0.8.2"), True, round(44.42 * GIB), "L40S", 32768)[:2] == (2048, 1024)
    assert scheduler_defaults(v("0.10.2"), True, round(79.15 * GIB), "A100 80GB", 8192)[:2] == (2048, 256)
    assert scheduler_defaults(v("0.6.4"), False, None, None, 20000)[:2] == (20000, 256)
    assert scheduler_defaults(v("0.6.4"), False, None, None, 131072)[:2] == (512, 256)
    # max_num_seqs never above the batched tokens, tokens never above seqs × max_model_len
    assert scheduler_defaults(v("0.21.0"), True, round(79.19 * GIB), "H100", 4)[:2] == (4096, 1024)


def test_capture_sizes_per_version() -> None:
    v = parse_version
    assert len(capture_sizes(v("0.6.4"), False, 256, 8192)) == 35  # V0: 1, 2, 4, 8…256
    assert len(capture_sizes(v("0.10.2"), True, 256, 8192)) == 67  # 1, 2, 4, 8…512 step 8
    assert len(capture_sizes(v("0.10.2"), True, 64, 8192)) == 3 + 16  # up to 2 × 64
    assert len(capture_sizes(v("0.11.1"), True, 256, 8192)) == 3 + 31 + 17  # step 16 above 256
    assert capture_sizes(v("0.11.1"), True, 256, 100)[-1] == 100  # max_num_batched_tokens appended
    g = graph_terms(v("0.11.0"), True, "auto", False, 256, 2048, 48, 1000, DEFAULT)
    assert (g.mode, g.piecewise, g.full) == ("FULL_AND_PIECEWISE", 67, 35)  # file 18 logs 35 + 67
    assert graph_terms(v("0.10.2"), True, "auto", False, 256, 2048, 48, 1000, DEFAULT).full == 0


def test_graph_pool_by_hand() -> None:
    # 67 piecewise sizes × (94 layers + 1) pieces, plus the largest size's tensors
    g = graph_terms(parse_version("0.10.2"), True, "auto", False, 256, 2048, 94, 1000, DEFAULT)
    assert g.total == 512 * 1000 + DEFAULT.graph_bytes * 67 * 95


def test_graph_pool_near_logged_pools() -> None:
    # file 14 (Qwen3-235B FP8, TP8, 94 layers): 3.45 GiB; file 15 (Qwen3-Next, TP2): 2.37 GiB
    g = cuda_graph_bytes(shape("qwen3-235b-a22b-fp8"), ctx(tp=8, expert_parallel=True))
    assert abs(g / (3.45 * GIB) - 1) < 0.35  # the in-sample constant; leave-one-out in RESULTS-estimates.md


def test_non_torch_snapshot_rule() -> None:
    v = parse_version
    assert snapshot_before_communicators(v("0.10.2"), True)
    assert not snapshot_before_communicators(v("0.11.0"), True)
    assert snapshot_before_communicators(v("0.21.0"), False)  # V0 always
    unknown = non_torch_terms(v("0.10.2"), True, 2, "unknown", DEFAULT)
    pcie = non_torch_terms(v("0.10.2"), True, 2, "pcie", DEFAULT)
    assert unknown.total >= pcie.total and "NVLink assumed" in unknown.note  # conservative
    after = non_torch_terms(v("0.11.0"), True, 8, "nvlink", DEFAULT)  # lazily connected, after the snapshot
    assert after.communicators == DEFAULT.nccl_lazy_nvlink and "PR #25359" in after.note
    assert non_torch_terms(v("0.11.0"), True, 8, "pcie", DEFAULT).communicators == DEFAULT.nccl_pcie
    assert non_torch_terms(v("0.10.2"), True, 1, "nvlink", DEFAULT).communicators == 0


def test_enforce_eager_has_no_graphs() -> None:
    assert cuda_graph_bytes(shape("llama-3.1-8b"), replace(ctx(), enforce_eager=True)) == 0
    assert cuda_graph_bytes(shape("llama-3.1-8b"), ctx(cudagraph_mode="NONE")) == 0


def test_last_pipeline_stage_carries_the_sampler() -> None:
    llama = shape("llama-3.1-70b")
    c = EstimateContext(4, 2, 2048, 256, False, rules_for("0.10.2"))
    ranks = estimate_ranks(llama, c, 80 * GIB, None)
    first, last = ranks[0].activation, ranks[-1].activation
    assert first is not None and last is not None and last.bytes > first.bytes
    assert "no sampler" in first.note


def test_vision_encoder_counted_for_qwen_vl() -> None:
    from app.core.vision import vision_geometry

    cfg = get_model("qwen3-vl-30b-a3b-instruct").config
    geo = vision_geometry(cfg)
    assert geo is not None and (geo.depth, geo.width, geo.patch_size) == (27, 1152, 16)
    vl = shape_from_config(cfg)
    with_vision = activation_bytes(vl, ctx("0.11.0", tp=4, vision=geo))
    assert with_vision > activation_bytes(vl, ctx("0.11.0", tp=4)) + GIB
    assert vision_geometry(get_model("llama-3.1-8b").config) is None


MODELS = ("llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v2-lite", "qwen3-next-80b-a3b", "gemma-3-27b-it")


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.integers(1, 65536),
    st.integers(1, 65536),
    st.sampled_from(["0.6.4", "0.10.2", "0.11.1", "0.21.0"]),
    st.sampled_from([1, 2, 4, 8]),
)
def test_more_batched_tokens_never_lowers_activation(slug: str, a: int, b: int, version: str, tp: int) -> None:
    s = shape(slug)
    lo, hi = sorted((a, b))
    assert activation_bytes(s, ctx(version, tp=tp, mnbt=lo)) <= activation_bytes(s, ctx(version, tp=tp, mnbt=hi))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from([1, 2, 4]), st.sampled_from([2, 4, 8]), st.booleans())
def test_more_tp_never_raises_the_sharded_part(slug: str, tp: int, factor: int, v1: bool) -> None:
    s = shape(slug)
    assert forward_per_token(s, tp * factor, v1=v1)[0] <= forward_per_token(s, tp, v1=v1)[0]
    assert forward_per_token(s, tp * factor, v1=v1)[1] >= forward_per_token(s, tp, v1=v1)[1] - 2 * s.hidden_size


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(["0.6.4", "0.10.2", "0.21.0"]), st.integers(1, 1024))
def test_enforce_eager_zero_graphs_property(slug: str, version: str, seqs: int) -> None:
    c = replace(ctx(version, seqs=seqs), enforce_eager=True)
    assert cuda_graph_bytes(shape(slug), c) == 0
    assert non_torch_bytes(shape(slug), c) >= 0


def test_qwen3_vl_dummy_video_by_hand() -> None:
    from app.core.vision import qwen3_video_item

    # max_model_len 65,536: 131,072 frames fit the token count, / 999 per-prompt videos = 131 frames;
    # smart_resize of 4096² over 131 frames: beta = sqrt(131 · 4096² / 25,165,824) = 9.345 → 416 px;
    # grid 66 × 26 × 26 = 44,616 patches, 11,154 tokens, counted ×12.5 = 139,425 for the budget
    assert qwen3_video_item(65536) == (44616, 11154, 139425)
    # short contexts: the start value of 2 frames at the full 4096² image size capped by the pixels
    _, tokens, _ = qwen3_video_item(4096)
    assert tokens <= 25165824 // (16 * 16 * 2 * 4)


def test_qwen3_vl_profile_matches_file_18() -> None:
    # file 18 (v0.11.0, Qwen3-VL-30B-A3B, TP4, RTX 3090 23.58 GiB, util 0.9, max_model_len 65,536):
    # 21.22 − 14.77 (weights) − 2.31 (KV) − 0.20 (non-torch) = 3.94 GiB of profile peak. The video
    # wins the dummy modality; its output is scattered into a 139,425-row tensor (×4 with deepstack).
    from app.core.vision import vision_geometry

    cfg = get_model("qwen3-vl-30b-a3b-instruct").config
    geo = vision_geometry(cfg)
    assert geo is not None and geo.deepstack == 3 and geo.qwen3
    vl = shape_from_config(cfg)
    terms = activation_for_stage_v(vl, ctx("0.11.0", tp=4, vision=geo, max_model_len=65536))
    assert terms.encoder_cache >= 139425 * 2048 * 4 * 2
    assert terms.peak / (3.94 * GIB) == pytest.approx(1, abs=0.08)
    # from v0.14 (PR #30475) no ×12.5 and no scatter: the image is the larger item again
    later = activation_for_stage_v(vl, ctx("0.14.0", tp=4, vision=geo, max_model_len=65536))
    assert later.encoder_cache < terms.encoder_cache and "image" in later.notes[0]


def test_fit_takes_nvlink_excess_over_the_base_fitted_on_the_same_observations() -> None:
    from app.core.calibration import Observation, fit

    obs = [
        Observation("non_torch_base_v0", 100, "a"),
        Observation("non_torch_base_v0", 300, "b"),
        Observation("non_torch_base_v1", 50, "c"),
        Observation("nccl_nvlink", 1000, "d", "v0"),  # excess 1000 - 200
        Observation("nccl_nvlink", 650, "e", "v1"),  # excess 650 - 50
        Observation("nccl_nvlink", 100, "f", "v0"),  # below its base: 0
    ]
    cal = fit(obs)
    assert (cal.non_torch_v0, cal.non_torch_v1) == (200, 50)
    assert cal.nccl_nvlink == 600  # median of 800, 600, 0
    # with no whole-device observation the fallback is the larger fitted base, not the in-sample value
    assert cal.non_torch_whole == 200
    assert fit(obs[:2]).nccl_nvlink == DEFAULT.nccl_nvlink  # no NVLink run left: the recorded fit

"""The "activation" row: the torch peak of vLLM's profile run, term by term.

vLLM measures `torch_peak_increase = peak allocated during profile_run − allocated before`
(`memory_profiling`, vllm/utils/mem_utils.py; V1 `Worker.determine_available_memory`,
vllm/v1/worker/gpu_worker.py). The profile run (`GPUModelRunner.profile_run`,
vllm/v1/worker/gpu_model_runner.py @28be48fa) is, in order:

1. the multimodal encoder on a dummy batch (vision models; `_get_mm_dummy_batch`), whose outputs
   stay in `encoder_cache` until the end of the profile;
2. `_dummy_run(max_num_tokens)`: one forward of `max_num_batched_tokens` tokens split over
   `num_reqs = min(max_num_seqs, tokens)` requests;
3. on the last pipeline stage only, `_dummy_sampler_run` over the `num_reqs` last hidden states:
   logits of the whole vocabulary and the sampler's top-k/top-p (k = vocab − 1, p = 0.9).

Tensors of one step are freed before the next, so the peak is the largest step plus what
survives it (encoder outputs, the forward's output hidden states):

    activation = max(encoder_peak, cache + forward_peak + dequant, cache + hidden_out + sampler_peak)

where `dequant` is the fp16 weight the plain AWQ/GPTQ linear kernels dequantize inside the forward
(app.core.dequant_linear; 0 on every other path).

Each step is counted from the tensors the model code allocates (per token, per TP rank); the
counts are in the functions below with the code they come from. V0 (vllm/worker/worker.py
`determine_num_available_blocks`, model_runner.py `profile_run`) ran the same three steps with
max_num_seqs dummy sequences and V0's sampler (more full-vocabulary copies). There is no fitted
constant in this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.dequant_linear import dequant_peak_bytes
from app.core.shape import ModelShape
from app.core.versions import Version
from app.core.vision import VisionGeometry, encoder_profile_bytes

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class ActivationTerms:
    """The profile run's steps on one rank, in bytes, and the peak vLLM records."""

    forward: int
    sampler: int
    encoder: int
    encoder_cache: int
    hidden_out: int
    peak: int
    notes: tuple[str, ...]
    dequant: int = 0  # the plain AWQ/GPTQ kernels' dequantized weight, held beside the forward's peak


def _heads(n: int, tp: int) -> int:
    """Heads on one rank (QKVParallelLinear: q heads split, KV heads replicated below TP)."""
    return max(1, -(-n // tp))


def attention_elems_per_token(shape: ModelShape, tp: int) -> tuple[int, int]:
    """(sharded, unsharded) elements live per token at the attention step's peak.

    `LlamaAttention.forward` (vllm/model_executor/models/llama.py): qkv = qkv_proj(x) (q + 2·kv
    heads of this rank), attn = attn(q, k, v) (q heads), out = o_proj(attn) (hidden, full size on
    every rank, then all-reduced out of place when TP > 1). The hidden states and the residual
    (2 × hidden) live across the whole decoder layer. MLA (`DeepseekV2MLAAttention`): q from
    q_b_proj (heads × (nope + rope)), the latent kv_a (kv_lora + rope, replicated), kv_b
    (heads × (nope + v)) for prefill, the output heads × v.
    """
    h = shape.hidden_size
    unsharded = 2 * h + h + (h if tp > 1 else 0)
    if shape.is_mla:
        # DeepSeek-V2/V3 geometry (qk_nope 128, qk_rope 64, v 128; the shape keeps only the latent):
        # q (192) + kv_b output (128 + 128) + attention output (128) per local head.
        heads = _heads(shape.num_attention_heads, tp)
        return heads * (192 + 256 + 128), unsharded + (shape.mla_latent_dim or 0)
    q = _heads(shape.num_attention_heads, tp) * shape.head_dim
    kv = max(1, shape.num_kv_heads // tp) * shape.head_dim if shape.num_kv_heads else 0
    return q + 2 * kv + q, unsharded


def mlp_elems_per_token(shape: ModelShape, tp: int, ep: bool = False, v1: bool = True) -> tuple[int, int]:
    """(sharded, unsharded) elements live per token at the feed-forward step's peak.

    Dense gated MLP (`LlamaMLP.forward`): gate_up (2 × I/TP) is alive while SiluAndMul writes
    its output (I/TP), beside the layer's hidden states and residual (2 × hidden); the down
    projection's output comes after gate_up is freed, so it is not part of this peak. Routed
    experts (`fused_experts_impl`, vllm/model_executor/layers/fused_moe/fused_moe.py @28be48fa):
    per token and top-k slot `cache13 = max(2·N, hidden)` and `cache2 = N`, N the expert
    intermediate on this rank (I/TP, or the whole I under expert parallelism, whose ranks see
    every token), plus the router logits (one per expert) and the output (hidden).

    V0 runs the model eagerly (no torch.compile graph freeing buffers at their last use): the
    Python locals of `LlamaMLP.forward` keep gate_up and the activation alive while down_proj
    writes its output (one more hidden vector) — file 01's two runs grow by 0.92 GiB over 9,000
    tokens, 54,885 elements per token for Llama-3.1-8B, 3·hidden + 3·I − 267 — and at TP > 1
    `RowParallelLinear.forward` all-reduces that output out of place
    (`tensor_model_parallel_all_reduce`, vllm/distributed/communication_op.py; pynccl and the
    custom all-reduce return a new tensor): one more hidden vector. public/39 (v0.7.1, Qwen2.5-32B,
    TP2, 10,000 tokens) logs 1.26 GiB on both ranks, 135 KB per token; 3·I/2 + 4·hidden is 124 KB.
    """
    h = shape.hidden_size
    eager = 0 if v1 else h * (2 if tp > 1 else 1)
    if shape.num_experts and shape.num_experts_per_tok and shape.moe_intermediate_size:
        n = shape.moe_intermediate_size // (1 if ep else tp)
        k = shape.num_experts_per_tok
        return k * (max(2 * n, h) + n), 3 * h + shape.num_experts + eager
    inter = shape.intermediate_size or 4 * h
    if not shape.gated_mlp:  # up (I/TP) alive while the activation writes its I/TP (phi.py PhiMLP, opt.py …)
        return 2 * inter // tp, 2 * h + eager
    return 3 * inter // tp, 2 * h + eager


def forward_per_token(shape: ModelShape, tp: int, ep: bool = False, v1: bool = True) -> tuple[int, int]:
    """(sharded, unsharded) bytes per batched token at the dummy forward's peak on one rank.

    The forward's peak is its largest step; the expert step is not sharded by TP under EP, so
    it goes to the unsharded part there.
    """
    b = _DTYPE_BYTES.get(shape.dtype, 2)
    a_sh, a_un = attention_elems_per_token(shape, tp)
    m_sh, m_un = mlp_elems_per_token(shape, tp, ep, v1)
    if ep and shape.num_experts:
        m_un, m_sh = m_un + m_sh, 0
    if a_sh + a_un >= m_sh + m_un:
        return a_sh * b, a_un * b
    return m_sh * b, m_un * b


def padded_vocab(vocab: int) -> int:
    """`pad_vocab_size` (vllm/model_executor/layers/vocab_parallel_embedding.py): to a multiple of 64."""
    return -(-vocab // 64) * 64


def sort_bytes_per_element(rows: int) -> int:
    """Temporaries of PyTorch's CUDA `sort` along the vocabulary (rows > 4096 columns always take the
    stable segmented path: aten/src/ATen/native/cuda/SortStable.cu `launch_stable_sort_kernel`),
    per element, beside the sorted values (4) and int64 indices (8) it returns:

    - 128 rows or more (`segmented_sort_pairs`): the int64 `reverse_indices` (8) and cub
      `DeviceSegmentedRadixSort::SortPairs`' temp storage, alternate key and value buffers (4 + 8): 20;
    - 2–127 rows (`segmented_sort_pairs_by_full_sort`): two int2 index-and-segment buffers (8 + 8)
      and `radix_sort_pairs`' alternate buffers (4 + 8): 28;
    - one row (`segmented_sort_large_segments`): the alternate buffers only (the iota is one row): 12.
    """
    if rows >= 128:
        return 20
    return 28 if rows > 1 else 12


def sampler_bytes_per_logit(version: Version, v1: bool = True, rows: int = 256, flashinfer: bool = False) -> int:
    """Bytes live per (request, vocabulary entry) at the dummy sampler's peak.

    - V0 (`_apply_top_k_top_p`, vllm/model_executor/layers/sampler.py): before e42c634ac
      (2024-09-20, PR #8619, v0.6.2) the resort built an int64 inverse permutation and gathered:
      model-dtype logits (2), fp32 (4), sorted values (4) and indices (8), probs_sort (4), cumsum
      (4), two masks (2), the inverse permutation (8) and the gathered result (4): 40. From PR #8619
      the resort is one `scatter_`, so, as in V1 below, the peak is the sort step (38 at 128+ rows).
    - V1 to v0.16 (`apply_top_k_top_p`, vllm/v1/sample/ops/topk_topp_sampler.py `forward_native`;
      the dummy run's top-k = vocab − 1, top-p = 0.9): the peak is the sort itself — model-dtype
      logits (2), the fp32 logits (4), sorted values (4) and int64 indices (8) plus the sort's own
      temporaries (`sort_bytes_per_element`): 38 at 128+ rows; the later masks, probs_sort and
      scatter (28) come after the temporaries are freed. Measured: files 14 (256 rows) and public/28
      (1,024 rows), Qwen3 vocabulary, log 38.6 and 38.8 B per logit of torch peak increase.
      With FlashInfer's sampler see `flashinfer` below.
    - From c656ba3b4 (2026-02-17, PR #33538, taken as v0.17): batches of 8 or more rows use the
      in-place Triton top-k/top-p kernel; the peak is then `random_sample`'s probs (4) and
      exponential noise q (4) beside the fp32 (4) and model-dtype (2) logits: 14.
    - `flashinfer`: the V1 sampler takes FlashInfer's path (`TopKTopPSampler.forward_cuda`, which the
      log states as "Using FlashInfer for top-p & top-k sampling."; the native path's lines say
      "Falling back to the PyTorch-native implementation"). `flashinfer_sample` calls
      `top_k_top_p_sampling_from_logits` (vllm/v1/sample/ops/topk_topp_sampler.py @e66d787bc^ and
      @4dd49b06f), which masks the top-k into a new fp32 tensor and softmaxes it (FlashInfer's
      sampling.py, "top_k_first"): model-dtype logits (2), fp32 logits (4), masked logits (4), probs
      (4) = 14, no sort. The dummy run sets top-k and top-p and no generators, so `forward_cuda` never
      falls back to the native path there. V0's sampler is not TopKTopPSampler: no effect. Whether
      a plan that does not state it takes this path: `flashinfer_sampler_in_use` (on by default from v0.21).
    """
    if version < (0, 6, 2):
        return 40
    if v1 and flashinfer:
        return FLASHINFER_SAMPLER_BYTES
    if not v1 or version < (0, 17, 0) or rows < 8:
        return 2 + 4 + 4 + 8 + sort_bytes_per_element(rows)
    return 14


#: Bytes per logit at FlashInfer's sampler peak (sampler_bytes_per_logit).
FLASHINFER_SAMPLER_BYTES = 2 + 4 + 4 + 4

# VLLM_USE_FLASHINFER_SAMPLER defaults to True from b92ef9ec5 (PR #40376, 2026-04-29; vllm/envs.py,
# vllm/v1/sample/ops/topk_topp_sampler.py): on CUDA (logprobs_mode not processed_*) the sampler takes
# `forward_cuda` when `FlashInferBackend.supports_compute_capability(cc)` — 7.5 ≤ cc ≤ 12.1
# (vllm/v1/attention/backends/flashinfer.py @28be48fa9) — and otherwise warns and falls back to the
# native path; =0 keeps native. Merged the day after PR #41069 (2026-04-28), which versions.py takes
# as v0.21, so v0.21.0 is taken as the first release with it (the mirror has no release tags; were
# v0.21 cut on 2026-04-28 exactly, it would be v0.22). Before, "not set" meant native.
FLASHINFER_SAMPLER_DEFAULT_SINCE: Version = (0, 21, 0)
FLASHINFER_SAMPLER_CAPABILITY = ((7, 5), (12, 1))


def flashinfer_sampler_in_use(
    stated: bool | None, version: Version, capability: tuple[int, int] | None
) -> tuple[bool, str]:
    """(whether V1's sampler takes FlashInfer's path, why) for VLLM_USE_FLASHINFER_SAMPLER as stated
    (None: not set). Not set, from v0.21 a card of known capability in FlashInfer's range takes it; an
    unknown card is sized on the native path, the larger peak below 8 rows (see above)."""
    if stated is not None:
        return stated, f"VLLM_USE_FLASHINFER_SAMPLER={int(stated)}"
    label = ".".join(str(p) for p in version)
    if version < FLASHINFER_SAMPLER_DEFAULT_SINCE:
        return False, f"VLLM_USE_FLASHINFER_SAMPLER not set: off by default in vLLM {label} (on from v0.21, PR #40376)"
    lo, hi = FLASHINFER_SAMPLER_CAPABILITY
    rule = "on by default from v0.21 (PR #40376) on compute capability 7.5–12.1"
    if capability is None:
        return False, (f"VLLM_USE_FLASHINFER_SAMPLER not set: {rule}, but the card's capability is not known, "
                       "so the native path (the larger peak below 8 rows) is assumed")
    cc = f"{capability[0]}.{capability[1]}"
    if lo <= capability <= hi:
        return True, f"VLLM_USE_FLASHINFER_SAMPLER not set: {rule}; the card is {cc}"
    return False, f"VLLM_USE_FLASHINFER_SAMPLER not set: {rule}; the card is {cc}, so vLLM falls back to native"


def sampler_step_bytes(
    shape: ModelShape, rows: int, version: Version, last_stage: bool, v1: bool = True, flashinfer: bool = False
) -> int:
    """The dummy sampler's peak: `rows` logits rows over the padded vocabulary (all-gathered to the
    whole vocabulary on every TP rank by `LogitsProcessor._gather_logits`), last PP stage only."""
    if not last_stage or not shape.vocab_size:
        return 0
    return rows * padded_vocab(shape.vocab_size) * sampler_bytes_per_logit(version, v1, rows, flashinfer)


@dataclass(frozen=True)
class ProfileInputs:
    """What the profile run depends on besides the model."""

    tp: int
    max_num_batched_tokens: int
    max_num_seqs: int
    version: Version
    last_stage: bool = True
    expert_parallel: bool = False
    vision: VisionGeometry | None = None
    v1: bool = True
    max_model_len: int | None = None  # the Qwen3-VL dummy video's frames depend on it
    flashinfer_sampler: bool = False  # the V1 sampler takes FlashInfer's path (sampler_bytes_per_logit)
    linear_kernel: str | None = None  # "awq" | "gptq": the plain, dequantizing linear method (app.core.dequant_linear)


def activation_terms(shape: ModelShape, inp: ProfileInputs) -> ActivationTerms:
    """The profile run's peak on one rank (see the module docstring for the rule)."""
    tokens = inp.max_num_batched_tokens
    sharded, unsharded = forward_per_token(shape, inp.tp, inp.expert_parallel, inp.v1)
    forward = tokens * (sharded + unsharded)
    rows = min(inp.max_num_seqs, tokens)
    b = _DTYPE_BYTES.get(shape.dtype, 2)
    hidden_out = tokens * shape.hidden_size * b  # the forward's output hidden states (the residual is freed)
    sampler = sampler_step_bytes(shape, rows, inp.version, inp.last_stage, inp.v1, inp.flashinfer_sampler)
    notes: list[str] = []
    encoder = cache = 0
    if inp.vision is not None:
        encoder, cache, note = encoder_profile_bytes(inp.vision, tokens, inp.tp, b, inp.version, inp.max_model_len)
        notes.append(note)
    dequant = dequant_peak_bytes(shape, inp.linear_kernel, inp.tp, tokens, inp.version)
    peak = max(encoder, cache + forward + dequant, cache + hidden_out + sampler)
    return ActivationTerms(forward, sampler, encoder, cache, hidden_out, peak, tuple(notes), dequant)


# The V1 sampler warm-up, after the KV cache is allocated: `Worker.compile_or_warm_up_model`
# (vllm/v1/worker/gpu_worker.py @4dd49b06f, v0.19) runs, on the last PP rank and after
# `capture_model` ("called after `capture_model` on purpose", PR #13776, 8d5aa466f, 2025-03-08, v0.8),
# `_dummy_run(min(max_num_seqs, max_num_batched_tokens))` without CUDA graphs and then
# `_dummy_sampler_run` over those rows; an out-of-memory there is "CUDA out of memory occurred when
# warming up sampler with N dummy requests" (gpu_model_runner.py `_dummy_sampler_run`). The memory it
# has is what the budget left outside the KV cache: the card's free memory at start − requested
# memory (the init snapshot is not in the budget), plus the profile's peak activation (counted in the
# budget, freed after profiling), minus the CUDA graphs captured outside the budget (before v0.21).
WARMUP_FROM = (0, 8, 0)
# Torch memory the allocator still holds after the profile, measured, not fitted: init free − weights
# − non-torch increase − "Free memory after profiling" on the v0.19 H100 logs of tests/data/vllm-logs
# 25-53 that print the three: 0.21-2.35 GiB (2.02 and 1.83 on the two runs whose warm-up ran out of
# memory, files 38 and 53). Between that measurement and the warm-up nothing gives it back: at @4dd49b06f
# `memory_profiling` (vllm/utils/mem_utils.py) runs gc.collect + empty_cache before measuring, so what is
# left is blocks still in use (e.g. the modular fused-MoE kernels' WorkspaceManager buffer,
# vllm/v1/worker/workspace.py; not gpt-oss's monolithic Triton MXFP4 path, whose buffers are per call)
# and the segments they pin; `capture_model` empties
# the cache before and after the capture; the warm-up follows with no empty_cache. With each log's own
# retained memory, "margin < retained" is the outcome on all 18 v0.19 logs that print the lines
# (bench/estimate_warmup.py); the margin alone does not separate (runs 31, 32, 36 started with smaller
# margins than log 38's 1.78 GiB), and the retained memory is not a function of the config (logs 35 and 53
# differ only in utilization, which acts after the measurement, and retain 1.62 / 1.83 GiB; 33 and 34,
# the same shapes, 1.24 / 0.50), so the gate keeps the measured range instead of a threshold.
RETAINED_AFTER_PROFILE = (225_485_783, 2_523_293_286)


@dataclass(frozen=True)
class Warmup:
    """The sampler warm-up on one rank: what it allocates and what is left for it (bytes)."""

    need: int
    left: int  # before the allocator's retained memory is taken out
    rows: int

    @property
    def margin(self) -> int:
        return self.left - self.need

    @property
    def state(self) -> str:
        """'fails' (short even with the least retained memory measured), 'at_risk' (short with the most)
        or 'fits'."""
        if self.margin < RETAINED_AFTER_PROFILE[0]:
            return "fails"
        return "at_risk" if self.margin < RETAINED_AFTER_PROFILE[1] else "fits"


def warmup_need(shape: ModelShape, rows: int, version: Version, flashinfer: bool = False) -> int:
    """The warm-up's peak: the sampler over `rows` logits rows (as in the profile run) beside the dummy
    run's last hidden states and their `torch.rand_like` copy."""
    b = _DTYPE_BYTES.get(shape.dtype, 2)
    return sampler_step_bytes(shape, rows, version, True, True, flashinfer) + 2 * rows * shape.hidden_size * b


def sampler_warmup(
    shape: ModelShape, inp: ProfileInputs, cushion: int, activation: int, graphs_outside: int
) -> Warmup | None:
    """The warm-up on a rank whose budget leaves `cushion` = free at start − requested outside it;
    None where vLLM runs none (V0, before v0.8, not the last PP stage, no vocabulary)."""
    if not inp.v1 or inp.version < WARMUP_FROM or not inp.last_stage or not shape.vocab_size:
        return None
    rows = min(inp.max_num_seqs, inp.max_num_batched_tokens)
    need = warmup_need(shape, rows, inp.version, inp.flashinfer_sampler)
    return Warmup(need, cushion + activation - graphs_outside, rows)

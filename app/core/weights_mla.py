"""The tensors of a DeepSeek-style MLA attention layer, and the copies vLLM builds from them after loading.

``DeepseekV2MLAAttention`` (models/deepseek_v2.py): q_a/q_b (or q_proj), kv_a_proj_with_mqa,
kv_b_proj, o_proj and their norms, split as ``weights_build`` describes; then what the MLA
attention backend's ``process_weights_after_loading`` keeps beside them, which depends on the release.
"""

from __future__ import annotations

from dataclasses import replace

from app.core.weights_builder import Builder
from app.core.weights_tensor import STILL, Tensor


def mla_tensors(b: Builder, p: str) -> list[Tensor]:
    """DeepseekV2MLAAttention (models/deepseek_v2.py) and MLAAttention.process_weights_after_loading."""
    cfg, s = b.cfg, b.shape
    h, heads = s.hidden_size, s.num_attention_heads
    rope, nope = cfg.int_or_none("qk_rope_head_dim") or 0, cfg.int_or_none("qk_nope_head_dim") or 0
    v_dim, kv_lora = cfg.int_or_none("v_head_dim") or nope, cfg.int_req("kv_lora_rank")
    q_lora = cfg.int_or_none("q_lora_rank")
    out = []
    if q_lora:
        out += [
            b.t(f"{p}.self_attn.q_a_proj", "attention", q_lora, h, "rep", quant="linear"),
            b.t(f"{p}.self_attn.q_a_layernorm", "norms", q_lora, 1, "rep"),
            b.t(f"{p}.self_attn.q_b_proj", "attention", heads * (nope + rope), q_lora, "col", quant="linear"),
        ]
    else:
        out.append(b.t(f"{p}.self_attn.q_proj", "attention", heads * (nope + rope), h, "col", quant="linear"))
    kv_b = b.t(f"{p}.self_attn.kv_b_proj", "attention", heads * (nope + v_dim), kv_lora, "col", quant="linear")
    out += [
        b.t(f"{p}.self_attn.kv_a_proj_with_mqa", "attention", kv_lora + rope, h, "rep", quant="linear"),
        b.t(f"{p}.self_attn.kv_a_layernorm", "norms", kv_lora, 1, "rep"),
        kv_b,
        b.t(f"{p}.self_attn.o_proj", "attention", h, heads * v_dim, "row", quant="linear"),
    ]
    if kv_b.scheme is not None:
        # mla_attention.py process_weights_after_loading: W_UK_T / W_UV are 16-bit copies of the
        # dequantized kv_b_proj ("we just store fp16/bf16 copies"); from PR #14770 (9532c4983, v0.8.0).
        out.append(b.t(f"{p}.self_attn.W_UK_T+W_UV", "attention", heads * (nope + v_dim), kv_lora, "col",
                       versions=((0, 8, 0), STILL)))  # fmt: skip
    return out + _mla_absorbed(b, p, q_lora or h, kv_b)


def _mla_absorbed(b: Builder, p: str, q_in: int, kv_b: Tensor) -> list[Tensor]:
    """v0.7.1 … v0.7.x: ``MLACommonImpl.process_weights_after_loading`` (attention/backends/mla/utils.py,
    PR #12528 ``cabaf4eff`` 2025-01-31 … PR #14770 ``9532c4983``, VLLM_MLA_PERFORM_MATRIX_ABSORPTION on by
    default) keeps, per layer and rank (n = heads ÷ TP): W_QR [q_in, n·rope] in the model dtype;
    W_Q_UK [q_in, n·kv_lora] and W_UV_O [n·kv_lora, hidden], requantized to fp8 with the checkpoint's
    block scales when the weights are fp8, else in the model dtype; and W_UK / W_UV, views of the
    dequantized kv_b_proj — float32 (``scaled_dequantize``) until PR #13181 (``f0b2da72a``, v0.7.3),
    the model dtype after; a view of the loaded weight (nothing new) when it is not quantized."""
    cfg, s = b.cfg, b.shape
    h, heads, kv_lora = s.hidden_size, s.num_attention_heads, cfg.int_req("kv_lora_rank")
    rope = cfg.int_or_none("qk_rope_head_dim") or 0
    scheme = kv_b.scheme
    is_fp8 = scheme is not None and scheme.weight_bits == 8 and ("fp8" in scheme.name or "float" in scheme.name)
    fp8 = scheme if is_fp8 else None
    v71, v73, v80 = (0, 7, 1), (0, 7, 3), (0, 8, 0)
    out = [
        b.t(f"{p}.self_attn.W_QR", "attention", heads * rope, q_in, "col", versions=(v71, v80)),
        replace(b.t(f"{p}.self_attn.W_Q_UK", "attention", heads * kv_lora, q_in, "col", versions=(v71, v80)),
                scheme=fp8),
        replace(b.t(f"{p}.self_attn.W_UV_O", "attention", h, heads * kv_lora, "row", versions=(v71, v80)),
                scheme=fp8),
    ]  # fmt: skip
    if kv_b.scheme is not None:
        rows = kv_b.rows
        out += [
            b.t(f"{p}.self_attn.W_UK+W_UV", "attention", rows, kv_b.cols, "col", versions=(v71, v73), dtype_bytes=4),
            b.t(f"{p}.self_attn.W_UK+W_UV", "attention", rows, kv_b.cols, "col", versions=(v73, v80)),
        ]
    return out

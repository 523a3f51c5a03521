"""Decoder layers whose MLP is not gated: one up projection, an activation, one down projection.

The default decoder (weights_build) follows models/llama.py: a MergedColumnParallelLinear
gate_up_proj of 2 × intermediate rows, bias-free linears, RMSNorm. The architectures below build
a plain ColumnParallelLinear up projection of ``intermediate`` rows and a RowParallelLinear down
projection instead, with biases and LayerNorms (weight + bias) where their vLLM class puts them.
Each rule cites its class at v0.19.0 (vllm/model_executor/models/<file>.py @4dd49b06f). Biases of
ColumnParallelLinear / RowParallelLinear default to ``bias=True`` (layers/linear.py).

Not covered here (their classes differ in more than the MLP: learned position embeddings, fused
MQA heads, parallel-attention norm variants): gpt2, gpt_bigcode, opt, falcon.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.hfconfig import HFConfig


@dataclass(frozen=True)
class PlainMLP:
    """How one ungated architecture lays out a decoder layer (resolved against its config)."""

    intermediate: int
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    layernorms: int  # LayerNorms (weight + bias) per decoder layer
    lm_head_bias: bool


def _flag(cfg: HFConfig, key: str, default: bool) -> bool:
    value = cfg.get(key)
    return default if value is None else bool(value)


def plain_mlp(cfg: HFConfig, hidden: int) -> PlainMLP | None:
    """The ungated layout of this config's architecture, or None for a gated (Llama-style) MLP."""
    mt = cfg.model_type()
    n_inner = cfg.int_or_none("n_inner") or 4 * hidden
    if mt == "phi":
        # phi.py: PhiAttention qkv_proj QKVParallelLinear(bias=True), dense RowParallelLinear (bias default);
        # PhiMLP fc1/fc2 of n_inner (default 4 × hidden) with biases; PhiLayer one input_layernorm
        # (attention and MLP in parallel); final_layernorm LayerNorm; lm_head ParallelLMHead(bias=True).
        return PlainMLP(n_inner, True, True, True, 1, True)
    if mt == "gptj":
        # gpt_j.py: qkv_proj / out_proj bias=False; GPTJMLP fc_in / fc_out of n_inner (default 4 × n_embd)
        # with biases; GPTJBlock one ln_1; ln_f; lm_head ParallelLMHead(bias=True).
        return PlainMLP(n_inner, False, False, True, 1, True)
    inter = cfg.int_or_none("intermediate_size") or 4 * hidden
    if mt == "gpt_neox":
        # gpt_neox.py: query_key_value / dense bias = attention_bias (default True); dense_h_to_4h /
        # dense_4h_to_h of intermediate_size with biases; input_ + post_attention_layernorm;
        # final_layer_norm; embed_out ParallelLMHead without bias.
        bias = _flag(cfg, "attention_bias", True)
        return PlainMLP(inter, bias, bias, True, 2, False)
    if mt == "starcoder2":
        # starcoder2.py: qkv_proj / o_proj / c_fc / c_proj bias = use_bias; two LayerNorms per layer;
        # final norm LayerNorm; lm_head without bias (or tied).
        bias = _flag(cfg, "use_bias", True)
        return PlainMLP(inter, bias, bias, bias, 2, False)
    return None


def rotary_factor(cfg: HFConfig, head_dim: int) -> float:
    """Fraction of the head dim the rotary cache covers: ``patch_rope_parameters``
    (transformers_utils/config.py @4dd49b06f) reads partial_rotary_factor / rotary_pct /
    rotary_emb_fraction; GPT-J's attention sets rotary_dim / head_size (gpt_j.py)."""
    if cfg.model_type() == "gptj":
        rotary_dim = cfg.int_or_none("rotary_dim")
        return rotary_dim / head_dim if rotary_dim and head_dim else 1.0
    for key in ("partial_rotary_factor", "rotary_pct", "rotary_emb_fraction"):
        value = cfg.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return 1.0

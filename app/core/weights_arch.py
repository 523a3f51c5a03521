"""Decoder layers whose MLP is not gated: one up projection, an activation, one down projection.

The default decoder (weights_build) follows models/llama.py: a MergedColumnParallelLinear
gate_up_proj of 2 × intermediate rows, bias-free linears, RMSNorm. The architectures below build
a plain ColumnParallelLinear up projection of ``intermediate`` rows and a RowParallelLinear down
projection instead, with biases and LayerNorms (weight + bias) where their vLLM class puts them.
Each rule cites its class at v0.19.0 (vllm/model_executor/models/<file>.py @4dd49b06f). Biases of
ColumnParallelLinear / RowParallelLinear default to ``bias=True`` (layers/linear.py).

GPT-2, GPTBigCode and OPT also learn absolute position embeddings (an ``nn.Embedding`` replicated
on every rank, no rotary cache); OPT may embed in a narrower ``word_embed_proj_dim`` with replicated
project_in / project_out linears; Falcon's LayerNorm count follows ``parallel_attn`` and
``num_ln_in_parallel_attn``, and alibi replaces its rotary cache.
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
    positions: int = 0  # rows of a learned absolute position embedding (replicated), 0 when none
    embed_width: int = 0  # width of the token embedding / lm_head when it is not hidden_size (OPT)
    final_norm: bool = True  # the decoder's final LayerNorm exists
    rope: bool = True  # the attention keeps a rotary cos/sin cache


def _flag(cfg: HFConfig, key: str, default: bool) -> bool:
    value = cfg.get(key)
    return default if value is None else bool(value)


def plain_mlp(cfg: HFConfig, hidden: int) -> PlainMLP | None:
    """The ungated layout of this config's architecture, or None for a gated (Llama-style) MLP."""
    mt = cfg.model_type()
    n_inner = cfg.int_or_none("n_inner") or 4 * hidden
    learned = _learned_positions(cfg, mt, n_inner)
    if learned is not None:
        return learned
    if mt in FALCON:
        return _falcon(cfg, hidden)
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


FALCON = ("falcon", "RefinedWeb", "RefinedWebModel")  # vllm/config/model.py maps all three to FalconForCausalLM


def _learned_positions(cfg: HFConfig, mt: str, n_inner: int) -> PlainMLP | None:
    """GPT-2, GPTBigCode and OPT: biased linears, two LayerNorms a layer, learned positions, tied head."""
    max_pos = cfg.int_or_none("max_position_embeddings", "n_positions") or 0
    if mt in ("gpt2", "gpt_bigcode"):
        # gpt2.py / gpt_bigcode.py @4dd49b06f: c_attn QKVParallelLinear(bias=True) (GPTBigCode with
        # one KV head when multi_query), c_proj RowParallelLinear(bias=True); MLP c_fc / c_proj of
        # n_inner (default 4 × hidden) with biases; ln_1, ln_2; wte VocabParallelEmbedding and
        # wpe nn.Embedding(max_position_embeddings, hidden) whole on every rank; ln_f; the lm_head
        # ParallelLMHead (bias=False) tied to wte.
        return PlainMLP(n_inner, True, True, True, 2, False, positions=max_pos, rope=False)
    if mt == "opt":
        # opt.py @4dd49b06f: q/k/v/out_proj and fc1/fc2 (ffn_dim) biased by enable_bias;
        # self_attn_layer_norm + final_layer_norm per layer; OPTLearnedPositionalEmbedding
        # (max_position_embeddings + 2 offset rows, whole per rank); embed_tokens of
        # word_embed_proj_dim with ReplicatedLinear project_in / project_out (bias=False) when it
        # differs from hidden_size; the decoder's final_layer_norm only when do_layer_norm_before and
        # not _remove_final_layer_norm.
        bias = _flag(cfg, "enable_bias", True)
        width = cfg.int_or_none("word_embed_proj_dim") or 0
        final = _flag(cfg, "do_layer_norm_before", True) and not _flag(cfg, "_remove_final_layer_norm", False)
        ffn = cfg.int_or_none("ffn_dim") or n_inner
        return PlainMLP(ffn, bias, bias, bias, 2, False, positions=max_pos + 2, embed_width=width,
                        final_norm=final, rope=False)  # fmt: skip
    return None


def _falcon(cfg: HFConfig, hidden: int) -> PlainMLP:
    """falcon.py @4dd49b06f: query_key_value / dense / dense_h_to_4h / dense_4h_to_h biased by ``bias``
    (default False); the MLP is 4 × hidden whatever ffn_hidden_size says (FalconMLP); LayerNorms:
    input + post_attention without parallel_attn, ln_attn + ln_mlp when num_ln_in_parallel_attn is 2
    (the default under new_decoder_architecture), else one input_layernorm; ln_f; rotary unless alibi;
    word_embeddings, lm_head tied by default (FalconForCausalLM: tie_word_embeddings None → True)."""
    bias = _flag(cfg, "bias", False)
    parallel = _flag(cfg, "parallel_attn", True)
    n_ln = cfg.int_or_none("num_ln_in_parallel_attn")
    if n_ln is None and _flag(cfg, "new_decoder_architecture", False):
        n_ln = 2
    norms = 2 if not parallel or n_ln == 2 else 1
    return PlainMLP(4 * hidden, bias, bias, bias, norms, False, rope=not _flag(cfg, "alibi", False))


def rotary_factor(cfg: HFConfig, head_dim: int) -> float:
    """Fraction of the head dim the rotary cache covers: ``patch_rope_parameters``
    (transformers_utils/config.py @4dd49b06f) reads partial_rotary_factor / rotary_pct /
    rotary_emb_fraction; GPT-J's attention sets rotary_dim / head_size (gpt_j.py)."""
    if cfg.model_type() == "gptj":
        rotary_dim = cfg.int_or_none("rotary_dim")
        return rotary_dim / head_dim if rotary_dim and head_dim else 1.0
    for key in ("partial_rotary_factor", "rotary_pct", "rotary_emb_fraction"):
        value = cfg.text_get(key)  # the text config alone (hf_text_config), as the length's RoPE
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return 1.0

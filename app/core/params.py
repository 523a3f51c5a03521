"""Parameter count and checkpoint bytes estimated from a model shape.

Counts, per decoder layer, the mixer (attention q/k/v/o, MLA projections, Mamba / gated-DeltaNet
projections) and the feed-forward block (dense gated MLP, routed experts, shared experts, router),
plus embeddings (twice unless tied), norms and, for multimodal configs, a vision tower described
by ``vision_config``. DeepSeek's MTP layer (``num_nextn_predict_layers``) is not counted: vLLM
loads it only for speculative decoding.

Checkpoint bytes (the rule, documented for the ledger's estimated "weights" row):
- unquantized: every parameter at the model dtype (2 B bf16/fp16).
- ``fp8`` (and fp8 ``compressed-tensors``/``modelopt``): decoder linear layers (attention,
  MLP, experts, mixer projections) at 1 B plus one fp32 scale per 128×128 block; embeddings,
  lm_head, norms, routers, conv/A/D and the vision tower stay in the model dtype.
- ``mxfp4`` (gpt-oss): routed experts at 4.25 bits (4-bit values + an 8-bit scale per 32);
  everything else in the model dtype.
- ``awq`` / ``gptq`` (``bits``, ``group_size``): linear layers at bits/8 B plus an fp16 scale and a
  packed zero point per group; the rest in the model dtype.
- anything else: the model dtype, with a note.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from app.core.hfconfig import HFConfig
from app.core.mamba import DTYPE_BYTES, mixer_params
from app.core.shape import ModelShape
from app.core.weights_arch import plain_mlp


@dataclass(frozen=True)
class ParamEstimate:
    """Parameter groups (counts) and the estimated checkpoint bytes."""

    embedding: int
    linear: int
    experts: int
    other: int
    vision: int
    inactive_experts: int
    weight_bytes: int

    @property
    def total(self) -> int:
        return self.embedding + self.linear + self.experts + self.other + self.vision

    @property
    def active(self) -> int:
        return self.total - self.inactive_experts


def _attention(cfg: HFConfig, shape: ModelShape) -> int:
    h, heads, kv, d = shape.hidden_size, shape.num_attention_heads, shape.num_kv_heads, shape.head_dim
    q_width = heads * d * (2 if shape.model_type == "qwen3_next" else 1)
    return h * q_width + 2 * h * kv * d + heads * d * h


def _mla(cfg: HFConfig, shape: ModelShape) -> int:
    h, heads = shape.hidden_size, shape.num_attention_heads
    rope = cfg.int_or_none("qk_rope_head_dim") or 0
    nope = cfg.int_or_none("qk_nope_head_dim") or 0
    v_dim = cfg.int_or_none("v_head_dim") or nope
    kv_lora = cfg.int_req("kv_lora_rank")
    q_lora = cfg.int_or_none("q_lora_rank")
    q = h * q_lora + q_lora * heads * (nope + rope) if q_lora else h * heads * (nope + rope)
    return q + h * (kv_lora + rope) + kv_lora * heads * (nope + v_dim) + heads * v_dim * h


def _gated(cfg: HFConfig) -> int:
    if plain_mlp(cfg, 0) is not None:  # phi / GPT-J / GPT-NeoX / StarCoder2 / GPT-2 / OPT / Falcon: up + down
        return 2
    default = "relu2" if cfg.model_type().startswith("nemotron_h") else "silu"
    act = str(cfg.get("mlp_hidden_act", "hidden_act") or default)
    return 2 if act == "relu2" else 3  # gated (SwiGLU/GeGLU) unless squared-ReLU (Nemotron-H)


def _moe_layer(cfg: HFConfig, i: int) -> bool:
    mt = cfg.model_type()
    if cfg.get("first_k_dense_replace") is not None:
        freq = cfg.int_or_none("moe_layer_freq") or 1
        return i >= (cfg.int_or_none("first_k_dense_replace") or 0) and i % freq == 0
    if cfg.get("expert_layer_period") is not None:
        return i % cfg.int_req("expert_layer_period") == (cfg.int_or_none("expert_layer_offset") or 0)
    if cfg.get("interleave_moe_layer_step") is not None:
        return (i + 1) % cfg.int_req("interleave_moe_layer_step") == 0
    only = cfg.get("mlp_only_layers")
    if isinstance(only, (list, tuple)) and i in only:
        return False
    step = cfg.int_or_none("decoder_sparse_step") or 1
    return (i + 1) % step == 0 or mt in ("mixtral", "gpt_oss")


@dataclass(frozen=True)
class _FFN:
    dense: int
    expert: int
    shared: int
    router: int


def _ffn_sizes(cfg: HFConfig, shape: ModelShape) -> _FFN:
    h, n_mat = shape.hidden_size, _gated(cfg)
    inter = shape.intermediate_size or 4 * h
    plain = plain_mlp(cfg, h)
    dense_inter = plain.intermediate if plain is not None else cfg.int_or_none("intermediate_size_mlp") or inter
    experts = shape.num_experts or 0
    expert_inter = shape.moe_intermediate_size or inter
    shared_inter = cfg.int_or_none("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size") or 0
    n_shared = cfg.int_or_none("n_shared_experts") or 0
    if n_shared and not shared_inter:
        shared_inter = n_shared * expert_inter
    if cfg.model_type() == "llama4_text" or cfg.get("interleave_moe_layer_step") is not None:
        shared_inter = shared_inter or inter
    bias = (2 * expert_inter + h) if cfg.model_type() == "gpt_oss" else 0
    return _FFN(
        dense=n_mat * h * dense_inter,
        expert=n_mat * h * expert_inter + bias,
        shared=n_mat * h * shared_inter + (h if shared_inter and shape.model_type == "qwen3_next" else 0),
        router=h * experts,
    )


def _has_ffn(cfg: HFConfig, kind: str) -> bool:
    if cfg.model_type() in ("mamba", "falcon_mamba", "mamba2"):
        return False
    return kind != "none" or cfg.model_type().startswith("nemotron_h")


def _decoder(cfg: HFConfig, shape: ModelShape) -> tuple[int, int, int, int]:
    """(linear, experts, other, inactive experts) over the decoder layers."""
    sizes = _ffn_sizes(cfg, shape)
    pattern = cfg.get("hybrid_override_pattern")
    linear = experts = other = inactive = 0
    attn = _mla(cfg, shape) if shape.is_mla else (_attention(cfg, shape) if shape.attention_layers else 0)
    mixer = mixer_params(shape.state, shape.hidden_size) if shape.state else 0
    top_k = shape.num_experts_per_tok or 0
    for i, kind in enumerate(shape.layer_kinds):
        other += 2 * shape.hidden_size
        linear += attn if kind in ("full", "sliding", "chunked", "mla") else 0
        linear += mixer if kind in ("mamba", "linear") else 0
        if not _has_ffn(cfg, kind) or (isinstance(pattern, str) and pattern[i] not in "-E"):
            continue
        is_moe = shape.num_experts and (pattern[i] == "E" if isinstance(pattern, str) else _moe_layer(cfg, i))
        if is_moe:
            n_exp = shape.num_experts or 0
            experts += n_exp * sizes.expert
            inactive += max(0, n_exp - top_k) * sizes.expert
            linear += sizes.shared
            other += sizes.router
        else:
            linear += sizes.dense
    return linear, experts, other, inactive


def _vision(cfg: HFConfig, notes: list[str]) -> int:
    vc = cfg.top.get("vision_config")
    if not isinstance(vc, Mapping):
        return 0
    v = HFConfig(vc)
    depth = v.int_or_none("depth", "num_hidden_layers")
    width = v.int_or_none("hidden_size", "embed_dim")
    if not depth or not width:
        notes.append("vision_config present but not describable: vision tower not counted")
        return 0
    inter = v.int_or_none("intermediate_size") or 4 * width
    block = 4 * width * width + 2 * width * inter + 9 * width + inter
    patch = v.int_or_none("patch_size") or 14
    embed = (v.int_or_none("in_channels", "num_channels") or 3) * (v.int_or_none("temporal_patch_size") or 1)
    embed = embed * patch * patch * width + (v.int_or_none("num_position_embeddings") or 0) * width
    out = v.int_or_none("out_hidden_size") or (cfg.int_or_none("hidden_size") or width)
    merge = (v.int_or_none("spatial_merge_size") or 1) ** 2 * width
    deepstack = vc.get("deepstack_visual_indexes")
    mergers = 1 + (len(deepstack) if isinstance(deepstack, (list, tuple)) else 0)
    notes.append("vision tower estimated from vision_config (blocks, patch embedding, mergers)")
    return depth * block + embed + mergers * (merge * merge + merge * out)


def _bytes(cfg: HFConfig, shape: ModelShape, est: ParamEstimate, notes: list[str]) -> int:
    b = DTYPE_BYTES[shape.dtype]
    plain = (est.embedding + est.other + est.vision) * b
    q = cfg.get("quantization_config")
    method = shape.quantization
    if method is None:
        return est.total * b
    if method == "mxfp4":
        return plain + est.linear * b + est.experts * 17 // 32
    if method in ("awq", "gptq") and isinstance(q, Mapping):
        bits = int(q.get("bits") or q.get("w_bit") or 4)
        group = int(q.get("group_size") or q.get("q_group_size") or 128)
        quant = est.linear + est.experts
        return plain + quant * bits // 8 + quant // group * (2 * 8 + bits) // 8
    if method in ("fp8", "compressed-tensors", "modelopt", "fbgemm_fp8"):
        quant = est.linear + est.experts
        if method != "fp8":
            notes.append(f"{method}: assumed 8-bit weights with block scales")
        return plain + quant + quant * 4 // (128 * 128)
    notes.append(f"quantization {method!r} not modelled: weights counted at the model dtype")
    return est.total * b


def estimate_params(cfg: HFConfig, shape: ModelShape, notes: list[str]) -> ParamEstimate:
    """Parameter counts and checkpoint bytes for the shape (see the module docstring for the rule)."""
    vocab = shape.vocab_size or 0
    embedding = vocab * shape.hidden_size * (1 if shape.tie_word_embeddings else 2)
    linear, experts, other, inactive = _decoder(cfg, shape)
    est = ParamEstimate(embedding, linear, experts, other + shape.hidden_size, _vision(cfg, notes), inactive, 0)
    return ParamEstimate(
        est.embedding, est.linear, est.experts, est.other, est.vision, est.inactive_experts,
        _bytes(cfg, shape, est, notes),
    )  # fmt: skip

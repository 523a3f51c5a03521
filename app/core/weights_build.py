"""The weight tensors of a model, read from its config.json the way vLLM's model classes build them.

Each decoder layer becomes a tuple of ``Tensor`` rows (shape of the whole model plus the way vLLM
shards it); identical layers share one tuple, so pricing a rank costs one pass over the distinct
layer kinds. Splits, with the vLLM class they follow (vllm/model_executor/layers/, @28be48fa9):

- ``col`` ColumnParallelLinear / MergedColumnParallelLinear (q, gate_up, MLA q_b/kv_b, in_proj):
  output rows ÷ TP.  ``row`` RowParallelLinear (o_proj, down_proj, out_proj): input cols ÷ TP;
  its bias is whole on every rank.  ``kv`` QKVParallelLinear's k/v (linear.py ``__init__``):
  KV heads ÷ TP, or one head per rank replicated ``tp // kv_heads`` times when TP > KV heads.
- ``rep`` ReplicatedLinear and norms (routers, MLA q_a/kv_a, RMSNorm/LayerNorm weights, patch
  embeddings): whole on every rank.
- ``vocab`` VocabParallelEmbedding / ParallelLMHead (vocab_parallel_embedding.py): the vocab padded
  to a multiple of 64 (``pad_vocab_size``, DEFAULT_VOCAB_PADDING_SIZE), then ÷ TP.
- ``e13`` / ``e2`` / ``erep`` FusedMoE (fused_moe/layer.py): ``w13`` [E, 2·I, H] and ``w2``
  [E, H, I] with I ÷ the MoE TP size (TP × DP, ``flatten_tp_across_dp_and_pcp``), or, with expert
  parallelism, E ÷ (TP × DP) whole experts per rank (``determine_expert_map``) and I unsplit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.core.hfconfig import HFConfig
from app.core.mamba import DTYPE_BYTES, mixer_params
from app.core.params import _ffn_sizes, _gated, _has_ffn, _moe_layer
from app.core.weights_quant import QuantPlan, Scheme

if TYPE_CHECKING:
    from app.core.shape import ModelShape

ATTN_KINDS = ("full", "sliding", "chunked", "mla")


@dataclass(frozen=True)
class Tensor:
    """One weight (or a stack of ``count`` identical expert weights), whole-model shape."""

    name: str
    group: str
    rows: int
    cols: int
    split: str
    scheme: Scheme | None = None  # None: stored at the model dtype
    count: int = 1
    unit: int = 1  # head width ("kv" split) or merged matrices ("e13": 2 for gate+up)
    pad: int = 1  # round each rank's expert intermediate up to this (mxfp4 backends)
    dtype_bytes: int = 2


@dataclass(frozen=True)
class Tensors:
    """The model's tensors: per-layer tuples (deduplicated), the first- and last-stage extras."""

    layers: tuple[tuple[Tensor, ...], ...]  # distinct layer tuples
    layer_index: tuple[int, ...]  # layer i → index into ``layers``
    first: tuple[Tensor, ...]  # embed_tokens
    last: tuple[Tensor, ...]  # final norm, lm_head
    every: tuple[Tensor, ...]  # rope caches, vision tower (on the first stage: see weights.py)
    vision: tuple[Tensor, ...]
    notes: tuple[str, ...]


class _Builder:
    def __init__(self, cfg: HFConfig, shape: ModelShape, quant: QuantPlan) -> None:
        self.cfg, self.shape, self.quant = cfg, shape, quant
        self.dtype_bytes = DTYPE_BYTES[shape.dtype]
        self.notes: list[str] = []

    def t(self, name: str, group: str, rows: int, cols: int, split: str, *, quant: str = "", **kw: int) -> Tensor:
        """A tensor; ``quant`` = "linear"/"experts" makes it subject to the checkpoint's scheme."""
        scheme = self.quant.scheme_for(name, quant == "experts") if quant else None
        pad = self.quant.pad_expert_intermediate if quant == "experts" and scheme is not None else 1
        return Tensor(
            name.split(".", 3)[-1] if name.startswith("model.layers.") else name,
            group,
            rows,
            cols,
            split,
            scheme,
            dtype_bytes=self.dtype_bytes,
            pad=pad,
            **kw,
        )


def _attention(b: _Builder, p: str) -> list[Tensor]:
    s, cfg = b.shape, b.cfg
    h, heads, kv, d = s.hidden_size, s.num_attention_heads, s.num_kv_heads, s.head_dim
    gate = 2 if s.model_type == "qwen3_next" else 1  # Qwen3-Next: q_proj also yields the output gate
    bias = bool(cfg.get("attention_bias", "qkv_bias", "bias")) or cfg.model_type() in ("qwen2", "qwen2_moe")
    out = [
        b.t(f"{p}.self_attn.q_proj", "attention", heads * d * gate, h, "col", quant="linear"),
        b.t(f"{p}.self_attn.k_proj", "attention", kv * d, h, "kv", quant="linear", unit=d),
        b.t(f"{p}.self_attn.v_proj", "attention", kv * d, h, "kv", quant="linear", unit=d),
        b.t(f"{p}.self_attn.o_proj", "attention", h, heads * d, "row", quant="linear"),
    ]
    if bias:
        out += [
            b.t(f"{p}.self_attn.q_bias", "attention", heads * d, 1, "col"),
            b.t(f"{p}.self_attn.kv_bias", "attention", 2 * kv * d, 1, "kv", unit=2 * d),
        ]
    if cfg.model_type() == "gpt_oss":  # o_proj bias (whole on each rank) and per-head sinks
        out += [
            b.t(f"{p}.self_attn.o_bias", "attention", h, 1, "rep"),
            b.t(f"{p}.self_attn.sinks", "attention", heads, 1, "col"),
        ]
    if cfg.model_type().startswith(("qwen3", "gemma3", "glm4_moe")) and cfg.get("use_qk_norm") is not False:
        out.append(b.t(f"{p}.self_attn.qk_norm", "norms", 2 * d, 1, "rep"))
    return out


def _mla(b: _Builder, p: str) -> list[Tensor]:
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
        # dequantized kv_b_proj ("we just store fp16/bf16 copies").
        out.append(b.t(f"{p}.self_attn.W_UK_T+W_UV", "attention", heads * (nope + v_dim), kv_lora, "col"))
    return out


def _mixer(b: _Builder, p: str) -> list[Tensor]:
    """Mamba-1/-2 and gated-DeltaNet mixers: every projection, conv and A/D/dt shard with TP."""
    s = b.shape
    assert s.state is not None
    g, h = s.state, s.hidden_size
    if g.kind == "gdn":
        inner = g.num_v_heads * g.head_v_dim
        in_rows = 2 * g.num_k_heads * g.head_k_dim + 2 * inner + 2 * g.num_v_heads
    elif g.kind == "mamba2":
        inner = g.d_inner
        in_rows = 2 * inner + 2 * g.n_groups * g.d_state + g.num_heads
    else:
        inner, in_rows = g.d_inner, 2 * g.d_inner
    rest = mixer_params(g, h) - in_rows * h - inner * h
    return [
        b.t(f"{p}.mixer.in_proj", "mixer", in_rows, h, "col", quant="linear"),
        b.t(f"{p}.mixer.out_proj", "mixer", h, inner, "row", quant="linear"),
        b.t(f"{p}.mixer.conv1d+A+D+dt+norm", "mixer", rest, 1, "col"),
    ]


def _ffn(b: _Builder, p: str, i: int, kind: str) -> list[Tensor]:
    cfg, s = b.cfg, b.shape
    pattern = cfg.get("hybrid_override_pattern")
    if not _has_ffn(cfg, kind) or (isinstance(pattern, str) and pattern[i] not in "-E"):
        return []
    sizes, h, n_mat = _ffn_sizes(cfg, s), s.hidden_size, _gated(cfg)
    is_moe = s.num_experts and (pattern[i] == "E" if isinstance(pattern, str) else _moe_layer(cfg, i))
    if not is_moe:
        inter = sizes.dense // (n_mat * h)
        return [
            b.t(f"{p}.mlp.gate_up_proj", "mlp", (n_mat - 1) * inter, h, "col", quant="linear"),
            b.t(f"{p}.mlp.down_proj", "mlp", h, inter, "row", quant="linear"),
        ]
    n_exp = s.num_experts or 0
    inter = s.moe_intermediate_size or s.intermediate_size or 4 * h
    router = "mlp.router" if cfg.model_type() == "gpt_oss" else "mlp.gate"
    out = [
        b.t(
            f"{p}.mlp.experts.w13",
            "experts",
            (n_mat - 1) * inter,
            h,
            "e13",
            quant="experts",
            count=n_exp,
            unit=n_mat - 1,
        ),
        b.t(f"{p}.mlp.experts.w2", "experts", h, inter, "e2", quant="experts", count=n_exp),
        b.t(f"{p}.{router}", "router", n_exp, h, "rep"),
    ]
    if cfg.model_type() == "gpt_oss":  # w13_bias / w2_bias (bf16) and the router bias
        out += [
            b.t(f"{p}.mlp.experts.w13_bias", "experts", 2 * inter, 1, "e13", count=n_exp, unit=2),
            b.t(f"{p}.mlp.experts.w2_bias", "experts", h, 1, "erep", count=n_exp),
        ]
    shared = sizes.shared // (n_mat * h) if sizes.shared >= n_mat * h else 0
    if shared:
        out += [
            b.t(
                f"{p}.mlp.shared_experts.gate_up_proj", "shared_experts", (n_mat - 1) * shared, h, "col", quant="linear"
            ),
            b.t(f"{p}.mlp.shared_experts.down_proj", "shared_experts", h, shared, "row", quant="linear"),
        ]
        if s.model_type in ("qwen3_next", "qwen2_moe"):
            out.append(b.t(f"{p}.mlp.shared_expert_gate", "router", 1, h, "rep"))
    return out


def _norms_per_layer(cfg: HFConfig) -> int:
    return 4 if cfg.model_type().startswith(("gemma2", "gemma3")) else 2


def _layer(b: _Builder, i: int, kind: str) -> tuple[Tensor, ...]:
    p = f"model.layers.{i}"
    out = [b.t(f"{p}.layernorms", "norms", _norms_per_layer(b.cfg) * b.shape.hidden_size, 1, "rep")]
    if kind == "mla":
        out += _mla(b, p)
    elif kind in ATTN_KINDS:
        out += _attention(b, p)
    elif kind in ("mamba", "linear") and b.shape.state is not None:
        out += _mixer(b, p)
    out += _ffn(b, p, i, kind)
    return tuple(out)


def build_tensors(config: Mapping[str, object], shape: ModelShape, quant: QuantPlan) -> Tensors:
    """Every weight tensor vLLM allocates for this config (whole model, before sharding)."""
    from app.core.weights_extra import edge_tensors, vision_tensors

    cfg = HFConfig(config)
    b = _Builder(cfg, shape, quant)
    index: dict[tuple[Tensor, ...], int] = {}
    layer_index = []
    for i, kind in enumerate(shape.layer_kinds):
        layer_index.append(index.setdefault(_layer(b, i, kind), len(index)))
    first, last, every = edge_tensors(b)
    vision = vision_tensors(b)
    return Tensors(tuple(index), tuple(layer_index), first, last, every, vision, tuple(b.notes))

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

Tensors outside the decoder layers: embeddings, LM head, final norm, rotary caches, vision tower.

- ``embed_tokens``: VocabParallelEmbedding on the first pipeline stage; ``lm_head``: ParallelLMHead
  on the last (models/llama.py ``LlamaModel.__init__`` / ``LlamaForCausalLM.__init__``). Tied
  embeddings share one tensor on a single stage; with PP > 1 the last stage builds its own
  ``embed_tokens`` for the tie (``is_first_rank or (tie_word_embeddings and is_last_rank)``).
- Rotary caches: ``RotaryEmbedding.__init__`` (rotary_embedding/base.py) registers a
  ``cos_sin_cache`` buffer of rows × rotary_dim in the model dtype, one per distinct rope
  (``get_rope`` caches them); the rows per rope type (linear scaling × factor, M-RoPE × 4, …)
  are ``weights_rope``'s; Gemma-3 has a local and a global rope. Measured: Llama-3.1-8B
  logs 14.9888 GiB = 8,030,261,248 parameters × 2 B + 131072 × 128 × 2 B exactly (file 01).
- Vision tower: blocks of QKV/proj/fc1/fc2 that vLLM's vision encoders build as column/row-
  parallel linears (models/qwen3_vl.py ``Qwen3_VisionBlock``, siglip.py, … with
  ``mm_encoder_tp_mode="weights"``, the default); patch and position embeddings and norms whole.
  It lives on the first pipeline stage. ``mm_encoder_tp_mode="data"`` (replicated) is not modelled.
- MTP / next-token-prediction layers (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``)
  are loaded only with speculative decoding: not counted, noted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from app.core.hfconfig import HFConfig
from app.core.mamba import DTYPE_BYTES, mixer_params
from app.core.params import _ffn_sizes, _gated, _has_ffn, _moe_layer
from app.core.weights_arch import PlainMLP, plain_mlp, rotary_factor
from app.core.weights_builder import Builder
from app.core.weights_mla import mla_tensors
from app.core.weights_quant import MXFP4_BIAS, QuantPlan, quant_plan
from app.core.weights_rope import rope_cache_rows, rope_max_position
from app.core.weights_tensor import Tensor, Tensors, WeightsModel, index_total_size

if TYPE_CHECKING:
    from app.core.shape import ModelShape

ATTN_KINDS = ("full", "sliding", "chunked", "mla")


def _attention(b: Builder, p: str) -> list[Tensor]:
    s, cfg = b.shape, b.cfg
    h, heads, kv, d = s.hidden_size, s.num_attention_heads, s.num_kv_heads, s.head_dim
    gate = 2 if s.model_type == "qwen3_next" else 1  # Qwen3-Next: q_proj also yields the output gate
    bias = bool(cfg.get("attention_bias", "qkv_bias", "bias")) or cfg.model_type() in ("qwen2", "qwen2_moe")
    plain = plain_mlp(cfg, h)  # phi / GPT-J / GPT-NeoX / StarCoder2: their own bias rules (weights_arch)
    bias = plain.qkv_bias if plain is not None else bias
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
    if plain is not None and plain.o_bias:  # RowParallelLinear's bias: whole on each rank
        out.append(b.t(f"{p}.self_attn.o_bias", "attention", h, 1, "rep"))
    if cfg.model_type() == "gpt_oss":  # o_proj bias (whole on each rank) and per-head sinks
        out += [
            b.t(f"{p}.self_attn.o_bias", "attention", h, 1, "rep"),
            b.t(f"{p}.self_attn.sinks", "attention", heads, 1, "col"),
        ]
    if cfg.model_type().startswith(("qwen3", "gemma3", "glm4_moe")) and cfg.get("use_qk_norm") is not False:
        out.append(b.t(f"{p}.self_attn.qk_norm", "norms", 2 * d, 1, "rep"))
    return out


def _mixer(b: Builder, p: str) -> list[Tensor]:
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


def _ffn_kind(b: Builder, i: int, kind: str) -> str:
    """"none", "dense" or "moe" for decoder layer ``i`` (params.py's per-family layer rules)."""
    cfg, s = b.cfg, b.shape
    pattern = cfg.get("hybrid_override_pattern")
    if not _has_ffn(cfg, kind) or (isinstance(pattern, str) and pattern[i] not in "-E"):
        return "none"
    is_moe = s.num_experts and (pattern[i] == "E" if isinstance(pattern, str) else _moe_layer(cfg, i))
    return "moe" if is_moe else "dense"


def _ffn(b: Builder, p: str, ffn: str) -> list[Tensor]:
    cfg, s = b.cfg, b.shape
    if ffn == "none":
        return []
    sizes, h, n_mat = _ffn_sizes(cfg, s), s.hidden_size, _gated(cfg)
    plain = plain_mlp(cfg, h)
    if ffn == "dense" and plain is not None:
        return _plain_mlp(b, p, plain)
    if ffn == "dense":
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
        bias = MXFP4_BIAS if b.quant.experts is not None and b.quant.experts.name.startswith("mxfp4") else None
        out += [
            replace(b.t(f"{p}.mlp.experts.w13_bias", "experts", 2 * inter, 1, "e13", count=n_exp, unit=2), scheme=bias),
            replace(b.t(f"{p}.mlp.experts.w2_bias", "experts", h, 1, "erep", count=n_exp), scheme=bias),
            b.t(f"{p}.{router}.bias", "router", n_exp, 1, "rep"),
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


def _plain_mlp(b: Builder, p: str, plain: PlainMLP) -> list[Tensor]:
    """ColumnParallelLinear up (÷ TP, its bias too) and RowParallelLinear down (bias whole per rank)."""
    h, inter = b.shape.hidden_size, plain.intermediate
    out = [
        b.t(f"{p}.mlp.up_proj", "mlp", inter, h, "col", quant="linear"),
        b.t(f"{p}.mlp.down_proj", "mlp", h, inter, "row", quant="linear"),
    ]
    if plain.mlp_bias:
        out += [b.t(f"{p}.mlp.up_bias", "mlp", inter, 1, "col"), b.t(f"{p}.mlp.down_bias", "mlp", h, 1, "rep")]
    return out


def _norms_per_layer(cfg: HFConfig) -> int:
    """Hidden-size vectors of the layer's norms: RMSNorm one each, LayerNorm two (weight, bias)."""
    plain = plain_mlp(cfg, 0)
    if plain is not None:
        return 2 * plain.layernorms
    return 4 if cfg.model_type().startswith(("gemma2", "gemma3")) else 2


def _layer(b: Builder, p: str, kind: str, ffn: str) -> tuple[Tensor, ...]:
    out = [b.t(f"{p}.layernorms", "norms", _norms_per_layer(b.cfg) * b.shape.hidden_size, 1, "rep")]
    if kind == "mla":
        out += mla_tensors(b, p)
    elif kind in ATTN_KINDS:
        out += _attention(b, p)
    elif kind in ("mamba", "linear") and b.shape.state is not None:
        out += _mixer(b, p)
    out += _ffn(b, p, ffn)
    return tuple(out)


def _named_layers(quant: QuantPlan) -> dict[int, list[str]] | None:
    """Ignore patterns that name one decoder layer, by index → the rest of each pattern (None: a
    regex / wildcard / substring pattern mentions layers, so every layer is matched by name)."""
    out: dict[int, list[str]] = {}
    search = _LAYER_NAME.search
    for pat in quant.ignore:
        if "layers" not in pat:
            continue
        m = search(pat)
        if m is None or pat.startswith("re:") or "*" in pat or quant.match == "substring":
            return None
        out.setdefault(int(m.group(1)), []).append(m.group(2) or "")
    return out


_LAYER_NAME = re.compile(r"layers\.(\d+)(?:\.(.*))?$")


def _touches(rest: str, generic: tuple[Tensor, ...]) -> bool:
    """Whether an ignore pattern's in-layer part can name one of the layer's quantizable tensors."""
    return not rest or any(t.kind and (t.name.startswith(rest) or rest.startswith(t.name)) for t in generic)


def build_weights_model(
    config: Mapping[str, object], shape: ModelShape, safetensors_index: Mapping[str, object] | None = None
) -> WeightsModel:
    """The WeightsModel of a parsed config (and, optionally, its checkpoint's safetensors index)."""
    quant = quant_plan(config, DTYPE_BYTES[shape.dtype])
    cfg = HFConfig(config)
    total = index_total_size(safetensors_index) if safetensors_index is not None else None
    mtp = cfg.int_or_none("num_nextn_predict_layers", "mtp_num_hidden_layers") or 0
    copies = 0 if shape.model_type == "qwen3_next" else 2
    if safetensors_index is not None:
        mtp, copies = _mtp_from_index(safetensors_index, shape.num_layers, mtp, copies)
    tensors = build_tensors(config, shape, quant)
    return WeightsModel(tensors, quant, shape.num_layers, shape.tie_word_embeddings, total, mtp, copies, config)


def _mtp_from_index(index: Mapping[str, object], n_layers: int, mtp: int, copies: int) -> tuple[int, int]:
    """MTP layers the checkpoint holds, from its tensor names: ``model.layers.N.*`` with N ≥ the
    decoder's layer count (DeepSeek-V3 / GLM-4.5) or ``mtp.layers.N.*`` (Qwen3-Next)."""
    names = index.get("weight_map")
    if not isinstance(names, Mapping) or not names:
        return mtp, copies
    layers: set[str] = set()
    embeds = 0
    for name in names:
        parts = str(name).split(".")
        extra = parts[:2] == ["model", "layers"] and parts[2].isdigit() and int(parts[2]) >= n_layers
        if extra or parts[:2] == ["mtp", "layers"]:
            layers.add(parts[2])
            embeds += name.endswith(("embed_tokens.weight", "shared_head.head.weight"))
    return len(layers), (embeds // len(layers) if layers else 0)


def build_tensors(config: Mapping[str, object], shape: ModelShape, quant: QuantPlan) -> Tensors:
    """Every weight tensor vLLM allocates for this config (whole model, before sharding)."""
    cfg = HFConfig(config)
    b = Builder(cfg, shape, quant)
    index: dict[tuple[Tensor, ...], int] = {}
    generic: dict[tuple[str, str], int] = {}
    named = _named_layers(quant)
    touches: dict[tuple[int, str], bool] = {}
    layer_index = []
    for i, kind in enumerate(shape.layer_kinds):
        ffn = _ffn_kind(b, i, kind)
        if (kind, ffn) not in generic:  # built under a name no ignore pattern can single out
            generic[kind, ffn] = index.setdefault(_layer(b, "model.layers.generic", kind, ffn), len(index))
        at = generic[kind, ffn]
        rests = named.get(i, ()) if named is not None else ("",)
        for r in rests:
            if (at, r) not in touches:
                touches[at, r] = _touches(r, next(k for k, v in index.items() if v == at))
        if any(touches[at, r] for r in rests):
            at = index.setdefault(_layer(b, f"model.layers.{i}", kind, ffn), len(index))
        layer_index.append(at)
    first, last, every = edge_tensors(b)
    vision = vision_tensors(b)
    return Tensors(tuple(index), tuple(layer_index), first, last, every, vision, tuple(b.notes))


def _rope_caches(b: Builder) -> list[Tensor]:
    cfg, s = b.cfg, b.shape
    if not s.attention_layers or cfg.get("position_embedding_type") in ("alibi", "absolute"):
        return []
    plain = plain_mlp(cfg, s.hidden_size)
    if plain is not None and not plain.rope:  # learned positions (GPT-2, OPT) or alibi (Falcon-RW)
        return []
    max_pos = rope_max_position(cfg, s.max_position_embeddings)  # the text config's, as the model's get_rope
    rope_dim = cfg.int_or_none("qk_rope_head_dim") if s.is_mla else None
    rotary = rope_dim or int(s.head_dim * rotary_factor(cfg, s.head_dim))  # get_rope: int(head × factor)
    if s.model_type in ("falcon_mamba", "mamba") or not max_pos or not rotary:
        return []
    rows = sum(rope_cache_rows(cfg, max_pos))  # weights_rope: rows per rope type, M-RoPE × 4
    return [b.t("rotary_emb.cos_sin_cache", "rope", rows, rotary, "rep")]


def edge_tensors(b: Builder) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...], tuple[Tensor, ...]]:
    """(first-stage, last-stage, every-stage) tensors."""
    s = b.shape
    vocab, h = s.vocab_size or 0, s.hidden_size
    plain = plain_mlp(b.cfg, h)
    width = (plain.embed_width if plain is not None else 0) or h  # OPT: word_embed_proj_dim
    first = [b.t("model.embed_tokens", "embedding", vocab, width, "vocab")]
    head = b.t("lm_head", "lm_head", vocab, width, "vocab", quant="linear" if _lm_head_quantized(b) else "")
    last = [head]
    if plain is None or plain.final_norm:  # LayerNorm: + bias
        last.insert(0, b.t("model.norm", "norms", h * (2 if plain is not None else 1), 1, "rep"))
    if plain is not None and plain.lm_head_bias:  # ParallelLMHead(bias=True): padded vocab ÷ TP
        last.append(b.t("lm_head.bias", "lm_head", vocab, 1, "vocab"))
    if plain is not None and plain.positions:  # nn.Embedding of learned positions: whole per rank
        first.append(b.t("model.embed_positions", "embedding", plain.positions, h, "rep"))
    every = _rope_caches(b)
    if width != h:  # OPTDecoder: ReplicatedLinear project_in and project_out on every stage
        every.append(b.t("model.project_in+project_out", "embedding", 2 * width, h, "rep"))
    _note_mtp(b)
    return tuple(first), tuple(last), tuple(every)


def _lm_head_quantized(b: Builder) -> bool:
    qc = b.cfg.top.get("quantization_config")
    return isinstance(qc, Mapping) and bool(qc.get("lm_head"))  # GPTQ/AWQ "lm_head": true


def _note_mtp(b: Builder) -> None:
    n = b.cfg.int_or_none("num_nextn_predict_layers", "mtp_num_hidden_layers") or 0
    if n:
        b.notes.append(f"{n} MTP layer(s) in the checkpoint not counted: vLLM loads them only for speculative decoding")


def _gemma3_projector(b: Builder, w: int) -> list[Tensor]:
    """Gemma-3's SigLIP tail and projector (models/gemma3_mm.py, siglip.py @4dd49b06f): the tower's
    post_layernorm (LayerNorm, built when every encoder layer is: ``require_post_norm``), then
    Gemma3MultiModalProjector's ``mm_input_projection_weight`` — an nn.Parameter of vision × text
    hidden, so whole on every rank and never quantized — and its ``mm_soft_emb_norm`` (GemmaRMSNorm)."""
    text = b.cfg.int_or_none("hidden_size") or w
    return [
        b.t("vision_tower.post_layernorm", "vision", 2 * w, 1, "rep"),
        b.t("multi_modal_projector.mm_input_projection_weight", "vision", w, text, "rep"),
        b.t("multi_modal_projector.mm_soft_emb_norm", "vision", w, 1, "rep"),
    ]


def vision_tensors(b: Builder) -> tuple[Tensor, ...]:
    vc = b.cfg.top.get("vision_config")
    if not isinstance(vc, Mapping):
        return ()
    v = HFConfig(vc)
    depth, w = v.int_or_none("depth", "num_hidden_layers"), v.int_or_none("hidden_size", "embed_dim")
    if not depth or not w:
        b.notes.append("vision_config present but not describable: vision tower not counted")
        return ()
    inter = v.int_or_none("intermediate_size") or 4 * w
    patch = v.int_or_none("patch_size") or 14
    chans = (v.int_or_none("in_channels", "num_channels") or 3) * (v.int_or_none("temporal_patch_size") or 1)
    image = v.int_or_none("image_size")
    positions = v.int_or_none("num_position_embeddings") or ((image // patch) ** 2 if image else 0)
    out_dim = v.int_or_none("out_hidden_size") or (b.cfg.int_or_none("hidden_size") or w)
    merge = (v.int_or_none("spatial_merge_size") or 1) ** 2 * w
    deepstack = vc.get("deepstack_visual_indexes")
    mergers = 1 + (len(deepstack) if isinstance(deepstack, (list, tuple)) else 0)  # catalogue configs hold tuples
    blk = "visual.blocks"
    out = [
        b.t(f"{blk}.attn.qkv", "vision", 3 * w, w + 1, "col", quant="linear", count=depth),
        b.t(f"{blk}.attn.proj", "vision", w, w, "row", quant="linear", count=depth),
        b.t(f"{blk}.mlp.linear_fc1", "vision", inter, w + 1, "col", quant="linear", count=depth),
        b.t(f"{blk}.mlp.linear_fc2", "vision", w, inter, "row", quant="linear", count=depth),
        b.t(f"{blk}.norms+biases", "vision", 6 * w, 1, "rep", count=depth),
        b.t("visual.patch_embed+pos_embed", "vision", chans * patch * patch + positions + 1, w, "rep"),
    ]
    out += _gemma3_projector(b, w) if b.cfg.top.get("model_type") == "gemma3" else [
        b.t("visual.merger.linear_fc1", "vision", merge, merge + 1, "col", quant="linear", count=mergers),
        b.t("visual.merger.linear_fc2", "vision", out_dim, merge + 1, "row", quant="linear", count=mergers),
        b.t("visual.merger.norm", "vision", 2 * merge, 1, "rep", count=mergers),
    ]  # fmt: skip
    if mergers > 1:
        # Qwen3VLForConditionalGeneration.__init__ (models/qwen3_vl.py, PR #24727 0f7acdd73 … @4dd49b06f):
        # one zeros(max_num_batched_tokens, text hidden) buffer per deepstack level, built on the GPU.
        hidden = b.cfg.int_or_none("hidden_size") or w
        out.append(b.t("deepstack_input_embeds", "buffers", mergers - 1, hidden, "tokens"))
    b.notes.append("vision tower from vision_config (blocks, patch/position embeddings, mergers), TP-sharded")
    return tuple(out)

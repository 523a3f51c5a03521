"""Per-rank KV-cache geometry: bytes per token, page bytes, groups, blocks and vLLM's admission figures.

Theory of operation
-------------------
vLLM (V1; ``vllm/v1/kv_cache_interface.py`` and ``vllm/v1/core/kv_cache_utils.py``, upstream
@52a31ccec, same arithmetic in v0.10.2 unless noted) sizes the KV cache of one worker like this:

1. Every cache-keeping layer on the worker gets a *spec* with a page = the bytes one block of
   ``block_size`` tokens costs in that layer: ``bs × h_rank × (d + dv) × B`` for full, sliding and
   chunked attention (``h_rank = max(1, kv_heads // tp)``, ``vllm/config/model.py`` get_num_kv_heads);
   ``bs × latent × B`` for MLA (one latent, replicated on every TP rank; from v0.7.1 and without
   VLLM_MLA_DISABLE, else full attention: ``app.core.mla_rules``); a fixed recurrent state
   for Mamba / gated DeltaNet (``app.core.mamba``). Per-token-head quantized caches add fp32 scales,
   nvfp4 stores ``d//2 + d//16`` bytes per head.
2. Hybrid Mamba models first raise the attention block size so that one attention page covers a
   Mamba page (``16 × cdiv(mamba_page, 16 × attn_page_1_token)``, ``HybridAttentionMambaModelConfig``
   in ``vllm/model_executor/models/config.py`` v0.10.2 / ``vllm/platforms/interface.py`` later),
   then pad the Mamba page up to the attention page (e.g. Qwen3-Next at TP2: 544 tokens, +1.49 %).
3. Groups (global, over the whole model, then projected onto the PP stage): all layers alike → one
   group; otherwise layers are grouped by spec, ``group_size`` = the fewest layers of any spec (the
   most, when most < 1.5 × fewest), each spec split into ``cdiv(n, group_size)`` groups taking
   ``layers[i::n]`` (padding the last) — ``_get_kv_cache_groups_uniform_page_size``.
4. ``num_blocks = available // page // group_size`` (``get_num_blocks``); for one uniform group that
   is ``available // Σ_layers page``. We expose ``page_bytes = page × group_size``: the bytes one
   block costs on this rank, the divisor for ``num_blocks``. The engine then takes the minimum over
   workers (the caller's job: every rank gives its own ``blocks_for``).
5. Report: ``max_concurrency = num_blocks / cdiv(Σ_groups max_memory_usage_bytes, page)``, with
   per-spec worst cases (full ``ceil(ceil(mml/dcp)/bs)``, sliding ``ceil(min(w−1+mnbt, mml)/bs)+1``,
   chunked ``ceil(min(chunk+mnbt, mml)/bs)``, Mamba one page); the "GPU KV cache size" token figure
   is ``num_blocks // n_groups × min_block_size × dcp`` (v0.9.1 … 2026-04) and
   ``int(max_concurrency × mml)`` since 2026-04-28 (``kv_cache_size_tokens``).
6. The start-up check refuses a ``max_model_len`` whose one-request need
   (``group_size × page × Σ_groups cdiv(max_memory_usage_bytes, page)``) exceeds the available bytes,
   and estimates the largest length that fits by binary search over [1, max_model_len].
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import InputError
from app.core.kvrank import KVGroup, RankKV, cdiv, positive
from app.core.layers import ATTENTION_KINDS, STATE_KINDS, LayerKind
from app.core.mamba import DTYPE_BYTES, state_bytes_per_layer
from app.core.shape import ModelShape

__all__ = [
    "KV_CACHE_DTYPES",
    "KVGroup",
    "RankKV",
    "cache_token_bytes",
    "kv_bytes_per_token_at",
    "kv_heads_per_rank",
    "pp_layer_split",
    "rank_kv",
    "rank_kv_stages",
    "rank_kv_uniform",
    "state_page_bytes",
]

# vllm/config/cache.py CacheDType (+ float32, which STR_DTYPE_TO_TORCH_DTYPE also maps).
KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto", "bfloat16", "float16", "float32", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
    "int8_per_token_head", "fp8_per_token_head", "nvfp4", "fp8_ds_mla",
)  # fmt: skip
_ONE_BYTE = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "int8_per_token_head", "fp8_per_token_head"})
_QUICK_NOTE = "model given as bytes per token per rank: one full-attention group"
_FP8_DS_MLA_TOKEN_BYTES = 656  # DeepSeek-V3.2 fp8_ds_mla: 512 fp8 + 4 fp32 scales + 64 bf16 rope


def pp_layer_split(num_layers: int, pp: int) -> tuple[int, ...]:
    """Layers per PP stage, as vLLM's ``get_pp_indices`` (``vllm/distributed/utils.py``, v0.6 … 52a31ccec).

    Even split; the remainder goes one layer each to the stages just before the last, walking
    backwards (the last stage holds the final norm and lm_head). ``VLLM_PP_LAYER_PARTITION`` is not
    modelled. Refuses a PP degree above the layer count.
    """
    positive("model.num_layers", num_layers)
    positive("layout.pp", pp)
    if pp > num_layers:
        raise InputError("layout.pp", f"pp={pp} is more than the model's {num_layers} layers")
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    return tuple(parts)


def rank_kv_uniform(kv_bytes_per_token: int, block_size: int = 16) -> RankKV:
    """Quick mode: the model given only as KV bytes per token per rank (one full-attention group)."""
    positive("model.kv_bytes_per_token", kv_bytes_per_token)
    positive("engine.block_size", block_size)
    page = kv_bytes_per_token * block_size
    group = KVGroup(kind="full", num_layers=1, page_bytes_per_layer=page, block_size=block_size)
    return RankKV(
        tp=1, pp=1, dcp=1, stage=0, layers_on_rank=1, kv_heads_per_rank=0,
        kv_bytes_per_token=kv_bytes_per_token, block_size=block_size, page_bytes=page,
        mamba_state_bytes_per_request=0, groups=(group,), kv_cache_dtype="auto", group_size=1,
        page_bytes_per_layer=page, notes=(_QUICK_NOTE,),
    )  # fmt: skip


def rank_kv(
    shape: ModelShape,
    *,
    tp: int = 1,
    pp: int = 1,
    dcp: int = 1,
    kv_cache_dtype: str = "auto",
    block_size: int = 16,
    hybrid_kv_cache_manager: bool = True,
) -> RankKV:
    """The tight rank of the layout: the PP stage whose block costs the most bytes (fewest blocks).

    ``hybrid_kv_cache_manager=False`` is vLLM's ``--disable-hybrid-kv-cache-manager``: sliding and
    chunked layers are then sized as full attention (``unify_hybrid_kv_cache_specs``). vLLM also turns
    the manager off by itself for chunked local attention (Llama-4) unless
    ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` is set, whose default changed from 0 to 1
    (vllm/envs.py; ``VllmConfig.__post_init__``): pass False to model a release with the old default.
    """
    stages = rank_kv_stages(
        shape, tp=tp, pp=pp, dcp=dcp, kv_cache_dtype=kv_cache_dtype, block_size=block_size,
        hybrid_kv_cache_manager=hybrid_kv_cache_manager,
    )  # fmt: skip
    return max(stages, key=lambda r: (r.page_bytes, -r.stage))


def kv_bytes_per_token_at(shape: ModelShape, tp: int = 1, pp: int = 1, kv_cache_dtype: str = "auto") -> int:
    """KV bytes per token on the tight rank (all attention layers of its stage, sliding ones included)."""
    return rank_kv(shape, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype).kv_bytes_per_token


def rank_kv_stages(
    shape: ModelShape,
    *,
    tp: int = 1,
    pp: int = 1,
    dcp: int = 1,
    kv_cache_dtype: str = "auto",
    block_size: int = 16,
    hybrid_kv_cache_manager: bool = True,
) -> tuple[RankKV, ...]:
    """One RankKV per PP stage (every TP rank of a stage is identical)."""
    _validate(shape, tp=tp, dcp=dcp, kv_cache_dtype=kv_cache_dtype, block_size=block_size)
    splits = pp_layer_split(shape.num_layers, pp)
    plan = _plan(shape, tp, kv_cache_dtype, block_size, _grouping_kinds(shape, hybrid_kv_cache_manager))
    stages: list[RankKV] = []
    start = 0
    for index, count in enumerate(splits):
        stages.append(_stage(shape, plan, index, range(start, start + count), tp, pp, dcp, kv_cache_dtype))
        start += count
    return tuple(stages)


def kv_heads_per_rank(shape: ModelShape, tp: int) -> int:
    """vLLM ``get_num_kv_heads``: 1 for MLA, else ``max(1, kv_heads // tp)`` (replicated above kv_heads)."""
    if shape.is_mla:
        return 1
    if not shape.attention_layers:
        return 0
    return max(1, shape.num_kv_heads // tp)


def _validate(shape: ModelShape, *, tp: int, dcp: int, kv_cache_dtype: str, block_size: int) -> None:
    positive("layout.tp", tp)
    positive("layout.dcp", dcp)
    positive("engine.block_size", block_size)
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise _unknown_dtype(kv_cache_dtype)
    heads, kv = shape.num_attention_heads, shape.num_kv_heads
    if heads and heads % tp:
        raise InputError("layout.tp", f"tp={tp} does not divide the model's {heads} attention heads (vLLM refuses it)")
    split_kv = shape.attention_layers and not shape.is_mla and kv
    if split_kv and ((tp >= kv and tp % kv) or (tp < kv and kv % tp)):
        raise InputError(
            "layout.tp",
            f"tp={tp} with {kv} KV heads: vLLM needs the KV heads to divide tp or tp to divide them "
            "(QKVParallelLinear divide())",
        )
    if tp % dcp:
        raise InputError("layout.dcp", f"dcp={dcp} must divide tp={tp} (DCP reuses the TP ranks)")


@dataclass(frozen=True)
class _Plan:
    """Model-wide decisions every stage shares: block size, unified page, global groups."""

    block_size: int
    token_bytes: int  # per attention layer and token on one rank
    page: int  # unified page per layer (Mamba pages padded up to it)
    state_bytes: int  # one request's state per Mamba/GDN layer on one rank (unpadded)
    padding_pct: float | None
    groups: tuple[tuple[LayerKind, tuple[int, ...]], ...]
    notes: tuple[str, ...]


def _grouping_kinds(shape: ModelShape, hybrid_manager: bool) -> tuple[LayerKind, ...]:
    """Layer kinds as the grouping sees them (``unify_hybrid_kv_cache_specs`` when the manager is off)."""
    if hybrid_manager or not ({"sliding", "chunked"} & set(shape.layer_kinds)) or "full" not in shape.layer_kinds:
        kinds = shape.layer_kinds
    else:
        kinds = tuple("full" if k in ("sliding", "chunked") else k for k in shape.layer_kinds)
    if not hybrid_manager and len({k for k in kinds if k != "none"}) > 1:
        raise InputError(
            "engine.disable_hybrid_kv_cache_manager",
            "vLLM cannot size this model with the hybrid KV cache manager disabled (its specs do not unify)",
        )
    return kinds


def _plan(shape: ModelShape, tp: int, kv_cache_dtype: str, block_size: int, kinds: tuple[LayerKind, ...]) -> _Plan:
    notes: list[str] = []
    h_rank = kv_heads_per_rank(shape, tp)
    attention = [k for k in ATTENTION_KINDS if k in shape.layer_kinds]
    token = cache_token_bytes(shape, attention[0], h_rank, kv_cache_dtype) if attention else 0
    state = state_page_bytes(shape, tp) if shape.state_layers else 0
    page, pct = token * block_size, None
    if state and not token:
        page = state
    elif state:
        align = 64 if shape.is_mla else 16
        needed = align * cdiv(state, align * token)
        if block_size < needed:
            notes.append(
                f"attention block size raised to {needed} tokens so a page covers a Mamba state; vLLM does this "
                "itself (HybridAttentionMambaModelConfig), so the flags pass no --block-size"
            )
            block_size = needed
        page = block_size * token
        pct = 100 * (page - state) / state
    if kv_cache_dtype == "auto" and shape.config_dtype != shape.dtype:
        notes.append(f"kv_cache_dtype auto = {shape.dtype} (vLLM's dtype for a {shape.config_dtype} config)")
    if kinds != shape.layer_kinds:
        notes.append("hybrid KV cache manager off: sliding/chunked layers sized as full attention")
    return _Plan(block_size, token, page, state, pct, _global_groups(kinds), tuple(notes))


def _global_groups(kinds: tuple[LayerKind, ...]) -> tuple[tuple[LayerKind, tuple[int, ...]], ...]:
    """``_get_kv_cache_groups_uniform_page_size`` over the whole model (one group when all alike)."""
    by_kind: dict[LayerKind, list[int]] = {}
    for index, kind in enumerate(kinds):
        if kind != "none":
            by_kind.setdefault(kind, []).append(index)
    if len(by_kind) <= 1:
        return tuple((kind, tuple(layers)) for kind, layers in by_kind.items())
    sizes = [len(layers) for layers in by_kind.values()]
    group_size = max(sizes) if max(sizes) < min(sizes) * 1.5 else min(sizes)
    groups: list[tuple[LayerKind, tuple[int, ...]]] = []
    for kind, layers in by_kind.items():
        n = cdiv(len(layers), group_size)
        groups.extend((kind, tuple(layers[i::n])) for i in range(n))
    return tuple(groups)


def _stage(
    shape: ModelShape, plan: _Plan, index: int, layers: range, tp: int, pp: int, dcp: int, kv_cache_dtype: str
) -> RankKV:
    groups = tuple(
        KVGroup(
            kind=kind,
            num_layers=len(on_rank),
            page_bytes_per_layer=plan.page,
            block_size=plan.block_size,
            sliding_window=shape.sliding_window if kind == "sliding" else None,
            attention_chunk_size=shape.attention_chunk_size if kind == "chunked" else None,
            layer_indices=on_rank,
        )
        for kind, members in plan.groups
        for on_rank in (tuple(i for i in members if i in layers),)
    )
    group_size = max((g.num_layers for g in groups), default=0)
    kinds = [shape.layer_kinds[i] for i in layers]
    dcp_note = (f"DCP {dcp}: each rank stores 1/{dcp} of every sequence's tokens",) if dcp > 1 else ()
    return RankKV(
        tp=tp, pp=pp, dcp=dcp, stage=index, layers_on_rank=len(layers),
        kv_heads_per_rank=kv_heads_per_rank(shape, tp),
        kv_bytes_per_token=plan.token_bytes * sum(1 for k in kinds if k in ATTENTION_KINDS),
        block_size=plan.block_size, page_bytes=plan.page * group_size,
        mamba_state_bytes_per_request=plan.state_bytes * sum(1 for k in kinds if k in STATE_KINDS),
        groups=groups, kv_cache_dtype=kv_cache_dtype, group_size=max(group_size, 1),
        page_bytes_per_layer=plan.page,
        max_model_len_limit=shape.max_len.limit if shape.max_len else shape.max_position_embeddings,
        mamba_page_padding_pct=plan.padding_pct, notes=plan.notes + dcp_note,
    )  # fmt: skip


def cache_token_bytes(shape: ModelShape, kind: str, kv_heads_per_rank: int, kv_cache_dtype: str) -> int:
    """Bytes one token costs in one attention layer on one rank (page = block_size × this)."""
    if kind not in ATTENTION_KINDS:
        return 0
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise _unknown_dtype(kv_cache_dtype)
    if kind == "mla":
        latent = shape.mla_latent_dim or shape.head_dim
        if kv_cache_dtype == "fp8_ds_mla":
            return _FP8_DS_MLA_TOKEN_BYTES
        if kv_cache_dtype in ("nvfp4", "int8_per_token_head", "fp8_per_token_head"):
            raise InputError("engine.kv_cache_dtype", f"{kv_cache_dtype} is not supported for MLA models")
        return latent * _dtype_bytes(shape, kv_cache_dtype)
    if kv_cache_dtype == "fp8_ds_mla":
        raise InputError("engine.kv_cache_dtype", "fp8_ds_mla applies to MLA models only")
    if kv_cache_dtype == "auto" and shape.checkpoint_kv_cache_dtype:
        kv_cache_dtype = shape.checkpoint_kv_cache_dtype
    h, d, dv = kv_heads_per_rank, shape.head_dim, shape.head_dim_v
    if kv_cache_dtype == "nvfp4":
        return h * ((d // 2 + d // 16) + (dv // 2 + dv // 16))
    token = h * (d + dv) * _dtype_bytes(shape, kv_cache_dtype)
    if kv_cache_dtype in ("int8_per_token_head", "fp8_per_token_head"):
        token += 2 * h * 4  # one fp32 scale per token and head, for K and for V
    return token


def _unknown_dtype(kv_cache_dtype: str) -> InputError:
    valid = ", ".join(KV_CACHE_DTYPES)
    return InputError("engine.kv_cache_dtype", f"unknown kv_cache_dtype {kv_cache_dtype!r}; valid: {valid}")


def _dtype_bytes(shape: ModelShape, kv_cache_dtype: str) -> int:
    if kv_cache_dtype == "auto" and shape.checkpoint_kv_cache_dtype:
        kv_cache_dtype = shape.checkpoint_kv_cache_dtype
    if kv_cache_dtype == "auto":
        return DTYPE_BYTES[shape.dtype]
    if kv_cache_dtype in DTYPE_BYTES:
        return DTYPE_BYTES[kv_cache_dtype]
    if kv_cache_dtype in _ONE_BYTE:
        return 1
    raise _unknown_dtype(kv_cache_dtype)


def state_page_bytes(shape: ModelShape, tp: int) -> int:
    """One request's recurrent state in one Mamba/GDN layer on one rank (unpadded), 0 if none."""
    return state_bytes_per_layer(shape.state, tp) if shape.state is not None else 0

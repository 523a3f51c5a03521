"""Which kind of cache each decoder layer keeps, and the recurrent-state geometry of hybrid models.

One rule per model family, following vLLM's model files (upstream @52a31ccec; the same rules hold
in v0.10.2, the release of the hybrid log in ``data/vllm-logs``) and the transformers config
defaults those files read:

- ``layer_types`` when the config lists it (gpt-oss ``sliding_attention``/``full_attention``,
  Qwen3-Next ``linear_attention``, newer Gemma configs). vLLM ``gpt_oss.py``, ``gemma2.py``,
  ``gemma3.py``, ``llama.py`` read ``config.layer_types[layer_idx]``.
- Gemma-2 default: layer i slides when ``i % 2 == 0`` (Gemma2Config default layer_types
  ``sliding if (i + 1) % 2``). Gemma-3 / Cohere2 ``sliding_window_pattern`` P (Gemma-3 default 6):
  layer i slides unless ``(i + 1) % P == 0``.
- Llama-4 chunked local attention (``llama4.py``: ``use_chunked_local_attn = not self.nope and
  config.attention_chunk_size``): ``no_rope_layers[i] == 0`` is a global NoPE layer; an empty or
  missing list means transformers' default ``int((i + 1) % 4 != 0)`` → every 4th layer global.
- Qwen3-Next: ``layer_types`` or ``full_attention_interval`` (default 4): ``(i + 1) % 4 == 0`` full,
  others gated DeltaNet (``qwen3_next.py``).
- Mamba (``mamba``, ``falcon_mamba``, ``mamba2``): all layers Mamba. Jamba: attention when
  ``i % attn_layer_period == attn_layer_offset``. Nemotron-H: ``hybrid_override_pattern``
  (``M`` Mamba-2, ``*`` attention, ``-`` MLP, ``E`` MoE). ``layers_block_type`` lists likewise.
- ``use_sliding_window: false`` (Qwen2/Qwen3) makes ``sliding_window`` inert (transformers sets it
  to None; vLLM ``get_hf_config_sliding_window`` likewise). A bare ``sliding_window`` in a model that
  is not interleaved (no ``layer_types`` holding both kinds: Mistral v0.1's 4096, Phi-3-mini's 2047)
  applies to every layer: ``EngineArgs.create_engine_config`` (``vllm/engine/arg_utils.py``) copies
  it into ``CacheConfig.sliding_window`` when ``not is_interleaved(...)``, and ``Attention`` uses that
  for layers given no per-layer window (``llama.py`` passes one only through ``layer_types``).
- MLA (``kv_lora_rank`` set, DeepSeek-V2/V3/R1, Kimi-K2): every attention layer is ``mla``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from app.core.errors import InputError
from app.core.hfconfig import HFConfig
from app.core.mamba import StateGeometry

LayerKind = Literal["full", "sliding", "chunked", "mla", "mamba", "linear", "none"]
ATTENTION_KINDS: frozenset[str] = frozenset({"full", "sliding", "chunked", "mla"})
STATE_KINDS: frozenset[str] = frozenset({"mamba", "linear"})

_TYPE_NAMES: dict[str, LayerKind] = {
    "full_attention": "full", "attention": "full", "global": "full",
    "sliding_attention": "sliding", "sliding": "sliding", "local": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
    "mamba": "mamba", "mamba2": "mamba",
    "mlp": "none", "moe": "none",
}  # fmt: skip
_PATTERN_CHARS: dict[str, LayerKind] = {"M": "mamba", "*": "full", "-": "none", "E": "none"}
_DEFAULT_WINDOWS: dict[str, int] = {"gemma2": 4096, "gemma3_text": 4096, "gemma3": 4096}

Kinds = tuple[LayerKind, ...]


def _from_list(values: Sequence[object], num_layers: int, field: str, table: dict[str, LayerKind]) -> Kinds:
    if len(values) != num_layers:
        raise InputError(f"model.config.{field}", f"has {len(values)} entries for {num_layers} layers")
    kinds: list[LayerKind] = []
    for value in values:
        kind = table.get(str(value)) if str(value) in table else table.get(str(value).lower())
        if kind is None:
            raise InputError(f"model.config.{field}", f"unknown layer type {value!r}")
        kinds.append(kind)
    return tuple(kinds)


def _listed(cfg: HFConfig, num_layers: int) -> Kinds | None:
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        return _from_list(list(pattern), num_layers, "hybrid_override_pattern", _PATTERN_CHARS)
    for field in ("layer_types", "layers_block_type"):
        values = cfg.get(field)
        if isinstance(values, Sequence) and not isinstance(values, str) and values:
            return _from_list(list(values), num_layers, field, _TYPE_NAMES)
    return None


def _family_default(cfg: HFConfig, num_layers: int, notes: list[str]) -> Kinds:
    mt = cfg.model_type()
    rng = range(num_layers)
    if mt in ("mamba", "falcon_mamba", "mamba2"):
        return tuple("mamba" for _ in rng)
    if cfg.get("attn_layer_period") is not None:
        period = cfg.int_req("attn_layer_period")
        offset = cfg.int_or_none("attn_layer_offset") or 0
        return tuple("full" if i % period == offset else "mamba" for i in rng)
    if mt == "qwen3_next" or cfg.get("full_attention_interval") is not None:
        interval = cfg.int_or_none("full_attention_interval") or 4
        return tuple("full" if (i + 1) % interval == 0 else "linear" for i in rng)
    if cfg.get("attention_chunk_size") is not None:
        return _chunked(cfg, num_layers, notes)
    if mt == "gemma2":
        notes.append("Gemma-2 default pattern: even layers sliding, odd layers global")
        return tuple("sliding" if i % 2 == 0 else "full" for i in rng)
    pattern = cfg.int_or_none("sliding_window_pattern")
    if pattern is None and mt in ("gemma3", "gemma3_text"):
        pattern = 6
        notes.append("Gemma-3 default sliding_window_pattern 6: every 6th layer global")
    if pattern:
        return tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in rng)
    return _plain(cfg, num_layers, notes)


def _chunked(cfg: HFConfig, num_layers: int, notes: list[str]) -> Kinds:
    no_rope = cfg.get("no_rope_layers")
    if isinstance(no_rope, Sequence) and not isinstance(no_rope, str) and no_rope:
        if len(no_rope) != num_layers:
            raise InputError("model.config.no_rope_layers", f"{len(no_rope)} entries for {num_layers} layers")
        flags = [bool(v) for v in no_rope]
    else:
        notes.append("Llama-4 no_rope_layers empty: transformers default, every 4th layer global (NoPE)")
        flags = [(i + 1) % 4 != 0 for i in range(num_layers)]
    return tuple("chunked" if use_rope else "full" for use_rope in flags)


def _plain(cfg: HFConfig, num_layers: int, notes: list[str]) -> Kinds:
    window = cfg.get("sliding_window")
    use_sw = cfg.get("use_sliding_window")
    if isinstance(window, int) and window > 0:
        if use_sw is True and cfg.get("max_window_layers") is not None:
            first = cfg.int_req("max_window_layers")
            return tuple("sliding" if i >= first else "full" for i in range(num_layers))
        if use_sw is False:
            notes.append("sliding_window is inert (use_sliding_window: false)")
        else:
            notes.append(
                f"sliding_window {window} on a non-interleaved model: vLLM applies it to every layer "
                "(CacheConfig.sliding_window, arg_utils create_engine_config)"
            )
            return tuple("sliding" for _ in range(num_layers))
    return tuple("full" for _ in range(num_layers))


def layer_kinds(cfg: HFConfig, num_layers: int, notes: list[str]) -> tuple[Kinds, int | None, int | None]:
    """(kind per layer, sliding window, attention chunk size) following vLLM's model files."""
    kinds = _listed(cfg, num_layers) or _family_default(cfg, num_layers, notes)
    if cfg.get("kv_lora_rank") is not None:
        kinds = tuple("mla" if k in ATTENTION_KINDS else k for k in kinds)
    window: int | None = None
    if "sliding" in kinds:
        window = cfg.int_or_none("sliding_window") or _DEFAULT_WINDOWS.get(cfg.model_type())
        if not window:
            notes.append("sliding layers listed but no sliding_window: counted as full attention")
            kinds = tuple("full" if k == "sliding" else k for k in kinds)
    chunk = cfg.int_or_none("attention_chunk_size") if "chunked" in kinds else None
    return kinds, window, chunk


def _state_dtypes(cfg: HFConfig, dtype: str, kind: str) -> tuple[str, str]:
    ssm = cfg.get("mamba_ssm_cache_dtype")
    if kind == "gdn" or not isinstance(ssm, str) or ssm in ("auto", ""):
        return dtype, dtype
    name = ssm.removeprefix("torch.")
    if name not in ("bfloat16", "float16", "float32"):
        raise InputError("model.config.mamba_ssm_cache_dtype", f"unknown dtype {ssm!r}")
    return dtype, name


def state_geometry(cfg: HFConfig, kinds: Kinds, hidden: int, dtype: str, notes: list[str]) -> StateGeometry | None:
    """Mamba-1 / Mamba-2 / gated-DeltaNet geometry, or None when no layer keeps a recurrent state."""
    if "linear" in kinds:
        conv, ssm = _state_dtypes(cfg, dtype, "gdn")
        return StateGeometry(
            kind="gdn", d_conv=cfg.int_or_none("linear_conv_kernel_dim") or 4, conv_dtype=conv, ssm_dtype=ssm,
            num_k_heads=cfg.int_req("linear_num_key_heads"),
            num_v_heads=cfg.int_req("linear_num_value_heads"),
            head_k_dim=cfg.int_req("linear_key_head_dim"),
            head_v_dim=cfg.int_req("linear_value_head_dim"),
        )  # fmt: skip
    if "mamba" not in kinds:
        return None
    heads = cfg.int_or_none("mamba_num_heads", "mamba_n_heads")
    if heads is None and cfg.model_type() == "mamba2":
        heads = cfg.int_or_none("num_heads")
    d_conv = cfg.int_or_none("conv_kernel", "mamba_d_conv", "d_conv") or 4
    d_state = cfg.int_req("ssm_state_size", "mamba_d_state", "state_size", "d_state")
    if heads:
        head_dim = cfg.int_req("mamba_head_dim", "mamba_d_head", "head_dim")
        conv, ssm = _state_dtypes(cfg, dtype, "mamba2")
        return StateGeometry(
            kind="mamba2", d_conv=d_conv, conv_dtype=conv, ssm_dtype=ssm, d_inner=heads * head_dim,
            d_state=d_state, num_heads=heads, head_dim=head_dim, n_groups=cfg.int_or_none("n_groups") or 1,
        )  # fmt: skip
    expand = cfg.get("mamba_expand", "expand") or 2
    d_inner = cfg.int_or_none("mamba_intermediate_size") or (
        cfg.int_or_none("intermediate_size") if cfg.model_type() in ("mamba", "falcon_mamba") else None
    )
    if d_inner is None:
        d_inner = int(float(str(expand)) * hidden)
        notes.append(f"Mamba d_inner = expand {expand} × hidden_size")
    dt_rank_raw = cfg.get("time_step_rank", "mamba_dt_rank")
    dt_rank = math.ceil(hidden / 16) if dt_rank_raw in (None, "auto") else int(str(dt_rank_raw))
    conv, ssm = _state_dtypes(cfg, dtype, "mamba1")
    return StateGeometry(
        kind="mamba1", d_conv=d_conv, conv_dtype=conv, ssm_dtype=ssm, d_inner=d_inner, d_state=d_state,
        dt_rank=dt_rank,
    )  # fmt: skip

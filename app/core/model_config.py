"""A Hugging Face ``config.json`` → ``ModelShape`` (``app.core.shape``): what vLLM needs to size the KV cache.

Reads the attention geometry (layers, heads, KV heads, head size, MLA latent), the per-layer
attention kind (full / sliding window / chunked local / MLA / Mamba / gated DeltaNet / none),
the recurrent-state geometry of hybrid models, the dtype and the quantization, and estimates the
parameter count and checkpoint bytes (``app.core.params``). Multimodal configs are read through
their nested ``text_config``. Every fallback taken is recorded in ``notes``.

vLLM is the spec (upstream @52a31ccec unless a line says otherwise):
- KV heads: ``vllm/config/model.py`` ``get_total_num_kv_heads``: the first of ``n_head_kv``,
  ``num_kv_heads``, ``num_key_value_heads``, ``multi_query_group_num``, ``num_attention_groups``,
  else ``num_attention_heads``; Falcon ``multi_query`` without ``new_decoder_architecture`` → 1;
  GPTBigCode ``multi_query`` (its class default) → 1 (``GPTBigCodeAttention``, gpt_bigcode.py @4dd49b06f).
- Head size: ``model_arch_config_convertor.py:48``: MLA → ``kv_lora_rank + qk_rope_head_dim`` (the
  full-K/V ``qk_nope + qk_rope`` of vLLM before 0.7.1 / VLLM_MLA_DISABLE is ``mla_qk_head_dim``: app.core.mla_rules);
  else ``head_dim``, ``hidden_size_per_head``, ``hidden_size // num_attention_heads``.
- dtype "auto": ``vllm/config/model.py`` ``_resolve_auto_dtype``: a float32 config is loaded as
  bfloat16 (first supported dtype on CUDA); ``dtype`` holds what vLLM runs, ``config_dtype`` the
  config's own value.
- Layer kinds: see ``_layer_kinds`` (one rule per model family, each citing its vLLM model file).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from app.core.config_defaults import TRANSFORMERS_VERSION
from app.core.errors import InputError
from app.core.hfconfig import HFConfig
from app.core.layers import ATTENTION_KINDS, LayerKind, layer_kinds, state_geometry
from app.core.max_len import derive_max_len
from app.core.params import estimate_params
from app.core.shape import ModelShape
from app.core.weights_arch import FALCON, plain_mlp
from app.core.weights_build import build_weights_model
from app.core.weights_tensor import Geometry, rank_group_bytes

#: Decoder layers a config may state: the largest vLLM serves have a few hundred (Llama-3.1-405B 126);
#: the layer walks are linear in it (100,000 layers: 4 s a plan; 10**12 never finished).
MAX_LAYERS = 10_000

_DTYPES: dict[str, str] = {
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32",
}  # fmt: skip


def _dtype(cfg: HFConfig, notes: list[str]) -> tuple[str, str]:
    raw = cfg.get("torch_dtype", "dtype")
    if raw is None:
        notes.append("no torch_dtype/dtype in the config: assumed bfloat16")
        return "bfloat16", "bfloat16"
    name = str(raw).removeprefix("torch.").lower()
    if name not in _DTYPES:
        raise InputError("model.config.torch_dtype", f"unknown dtype {raw!r} (bfloat16, float16, float32)")
    config_dtype = _DTYPES[name]
    if config_dtype == "float32":
        notes.append("float32 config: vLLM's dtype=auto loads it as bfloat16 (_resolve_auto_dtype)")
        return "bfloat16", config_dtype
    return config_dtype, config_dtype


def _kv_heads(cfg: HFConfig, heads: int, notes: list[str]) -> int:
    mt = cfg.model_type()
    falcon = mt in ("falcon", "RefinedWeb", "RefinedWebModel") and not cfg.get("new_decoder_architecture")
    if falcon and cfg.get("multi_query"):
        return 1
    if mt == "gpt_bigcode" and cfg.get("multi_query"):  # gpt_bigcode.py GPTBigCodeAttention: one KV head
        return 1
    value = cfg.int_or_none(
        "n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups"
    )
    if value is None:
        if heads:
            notes.append("no KV-head field: KV heads = attention heads (MHA)")
        return heads
    if value <= 0:
        raise InputError("model.config.num_key_value_heads", f"must be positive, got {value}")
    return value


def _head_dim(cfg: HFConfig, hidden: int, heads: int, notes: list[str]) -> int:
    explicit = cfg.int_or_none("head_dim", "attention_head_dim", "hidden_size_per_head")
    if explicit == 0:  # a stated head size is used as it is (get_head_size, model_arch_config_convertor.py @4dd49b06f)
        stated = next(k for k in ("head_dim", "attention_head_dim", "hidden_size_per_head") if cfg.get(k) == 0)
        raise InputError(f"model.config.{stated}", "a positive integer is required (got 0): vLLM would use a head "
                         "size of 0 as stated, not hidden_size // num_attention_heads")
    if explicit:
        return explicit
    if heads == 0:
        return 0
    if hidden % heads:
        notes.append(f"hidden_size {hidden} not divisible by {heads} heads: head_dim floored")
    return hidden // heads


def _text_mapping(config: Mapping[str, object]) -> Mapping[str, object]:
    if not isinstance(config, Mapping):
        raise InputError("model.config", "expected a JSON object (a Hugging Face config.json)")
    nested = config.get("text_config")
    if nested is not None and not isinstance(nested, Mapping):
        raise InputError("model.config.text_config", "expected a JSON object")
    return config


def _attention_geometry(
    cfg: HFConfig, kinds: tuple[LayerKind, ...], hidden: int, notes: list[str]
) -> tuple[int, int, int, int | None]:
    """(attention heads, KV heads, head size, MLA latent) — zeros for attention-free models."""
    heads = cfg.int_or_none("num_attention_heads", "n_head", "num_heads") or 0
    if not any(k in ATTENTION_KINDS for k in kinds):
        return heads, 0, 0, None
    if heads <= 0:
        raise InputError("model.config.num_attention_heads", "a positive integer is required")
    kv_heads = _kv_heads(cfg, heads, notes)
    kv_lora = cfg.int_or_none("kv_lora_rank") if "mla" in kinds else None
    if kv_lora is None:
        if heads % kv_heads:  # Attention.__init__ (vllm/model_executor/layers/attention/attention.py @4dd49b06f)
            raise InputError("model.config.num_key_value_heads", f"{kv_heads:,} KV heads do not divide the {heads:,} "
                             "attention heads (vLLM asserts num_heads % num_kv_heads == 0)")
        return heads, kv_heads, _head_dim(cfg, hidden, heads, notes), None
    notes.append("MLA: one latent of kv_lora_rank + qk_rope_head_dim per token and layer, 1 KV head")
    latent = kv_lora + (cfg.int_or_none("qk_rope_head_dim") or 0)
    return heads, kv_heads, latent, latent


def _positive(cfg: HFConfig, *keys: str) -> int | None:
    """A size that may be left out but not stated as 0: a vocabulary of 0 planned a model with no
    embedding, LM head or sampler, and a length of 0 a model that holds no token."""
    value = cfg.int_or_none(*keys)
    if value == 0:
        raise InputError(f"model.config.{keys[0]}", "must be a positive integer when given, got 0")
    return value


def shape_from_config(
    config: Mapping[str, object], safetensors_index: Mapping[str, object] | None = None
) -> ModelShape:
    """Parse a Hugging Face config.json (or a multimodal one with ``text_config``) into a ModelShape,
    with its tensor table for per-rank weights (``app.core.weights``; exact with the checkpoint's
    ``model.safetensors.index.json``). ``weight_bytes`` is what vLLM loads at TP1 / PP1."""
    cfg = HFConfig(_text_mapping(config))
    notes: list[str] = ["read the nested text_config (multimodal config)"] if cfg.nested else []
    num_layers = cfg.int_req("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    if num_layers > MAX_LAYERS:
        raise InputError("model.config.num_hidden_layers",
                         f"{num_layers:,} layers is more than {MAX_LAYERS:,}; no model vLLM serves has that many")
    hidden = cfg.int_req("hidden_size", "d_model", "n_embd")
    dtype, config_dtype = _dtype(cfg, notes)
    kinds, window, chunk = layer_kinds(cfg, num_layers, notes)
    heads, kv_heads, head_dim, latent = _attention_geometry(cfg, kinds, hidden, notes)
    shape = ModelShape(
        name=_str(config.get("_name_or_path")), architecture=_architecture(config),
        model_type=_str(config.get("model_type")) or cfg.model_type() or None,
        num_layers=num_layers, num_attention_heads=heads, num_kv_heads=kv_heads,
        head_dim=head_dim, head_dim_v=head_dim, hidden_size=hidden,
        intermediate_size=cfg.int_or_none("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"),
        vocab_size=_positive(cfg, "vocab_size", "padded_vocab_size"),
        max_position_embeddings=_positive(cfg, "max_position_embeddings", "n_positions", "seq_length"),
        tie_word_embeddings=_tied(cfg, notes), dtype=dtype, layer_kinds=kinds,
        sliding_window=window, attention_chunk_size=chunk, mla_latent_dim=latent,
        num_experts=cfg.int_or_none("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"),
        num_experts_per_tok=cfg.int_or_none("num_experts_per_tok", "experts_per_token", "moe_top_k"),
        moe_intermediate_size=cfg.int_or_none("moe_intermediate_size"), quantization=_quantization(cfg),
        params_total=0, params_active=0, weight_bytes=0, notes=(), config_dtype=config_dtype,
        state=state_geometry(cfg, kinds, hidden, dtype, notes),
        checkpoint_kv_cache_dtype=_checkpoint_kv_dtype(cfg, notes),
        mla_qk_head_dim=_mla_qk_head_dim(cfg) if latent is not None else None,
        max_len=derive_max_len(cfg),
    )  # fmt: skip
    est = estimate_params(cfg, shape, notes)
    weights = build_weights_model(config, shape, safetensors_index)
    notes += [n for n in weights.notes if n not in notes]
    notes += [
        f"{key} not in config.json: {value!r}, the default of transformers' {model_type!r} config class "
        f"(v{TRANSFORMERS_VERSION}), as vLLM reads it"
        for key, (value, model_type) in cfg.defaulted.items()
    ]
    return replace(
        shape, params_total=est.total, params_active=est.active, notes=tuple(notes),
        weight_bytes=sum(rank_group_bytes(weights, Geometry()).values()), quantizable_params=est.linear + est.experts,
        index_total_bytes=weights.index_total_bytes, weights=weights, gated_mlp=plain_mlp(cfg, hidden) is None,
    )  # fmt: skip


def _mla_qk_head_dim(cfg: HFConfig) -> int | None:
    """vLLM's head size for a DeepSeek MLA model without MLA: ``qk_nope_head_dim + qk_rope_head_dim``
    (``ModelConfig.get_head_size``, vllm/config.py @cabaf4eff^ and @baeded256), None when either is absent."""
    nope, rope = cfg.int_or_none("qk_nope_head_dim"), cfg.int_or_none("qk_rope_head_dim")
    return nope + rope if nope and rope else None


def _str(value: object) -> str | None:
    return str(value) if isinstance(value, str) and value else None


def _architecture(config: Mapping[str, object]) -> str | None:
    archs = config.get("architectures")
    if isinstance(archs, Sequence) and not isinstance(archs, str) and archs:
        return str(archs[0])
    return None


def _tied(cfg: HFConfig, notes: list[str]) -> bool:
    value = cfg.get("tie_word_embeddings")
    if value is None:
        # Gemma: its classes tie; Falcon / RefinedWeb: FalconForCausalLM ties when the config states
        # nothing ("previous Falcon model doesn't have tie_word_embeddings config", falcon.py @4dd49b06f)
        tied = cfg.model_type().startswith("gemma") or cfg.model_type() in FALCON
        notes.append(f"tie_word_embeddings absent: assumed {tied} (the default vLLM's class takes for the family)")
        return tied
    return bool(value)


def _checkpoint_kv_dtype(cfg: HFConfig, notes: list[str]) -> str | None:
    """vLLM ``resolve_kv_cache_dtype_string``: a modelopt checkpoint's KV scheme decides "auto"."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, Mapping) or not str(qc.get("quant_method", "")).startswith("modelopt"):
        return None
    inner = qc.get("quantization")
    sources = [inner, qc] if isinstance(inner, Mapping) else [qc]
    algo = next((s.get(k) for k in ("kv_cache_scheme", "kv_cache_quant_algo") for s in sources if s.get(k)), None)
    if isinstance(algo, Mapping):
        algo = "fp8" if (algo.get("num_bits"), algo.get("type")) == (8, "float") else None
    resolved = {"fp8": "fp8", "fp8_e4m3": "fp8", "nvfp4": "nvfp4"}.get(str(algo).lower()) if algo else None
    if resolved:
        notes.append(f"checkpoint KV-cache scheme {algo!r}: kv_cache_dtype auto resolves to {resolved}")
    return resolved


def _quantization(cfg: HFConfig) -> str | None:
    qc = cfg.get("quantization_config", "compression_config")
    if isinstance(qc, Mapping):
        method = qc.get("quant_method")
        if isinstance(method, str) and method:
            return method
        return "compressed-tensors" if "config_groups" in qc else "unknown"
    return None

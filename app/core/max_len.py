"""The model's maximum length as vLLM derives it from config.json, and the check of a given one.

Theory of operation, rule by rule as vLLM @28be48fa9 (2026-05-24) applies them:

1. ``derive_max_model_len_and_key`` (vllm/transformers_utils/model_arch_config_convertor.py,
   since 0eee877f6, 2026-01-02; the same list in vllm/config/model.py ``_get_and_verify_max_len``
   since Whisper, e1a5c2f0a, 2025-01-03): the SMALLEST of ``LENGTH_KEYS`` the text config states;
   then a truthy ``model_max_length`` replaces it whatever its size (Command-R / Cohere / Aya).
   Every key here is read from the text config alone (``hf_text_config``, vllm/transformers_utils/
   config.py ``get_hf_text_config``): a multimodal config's top-level keys are not the language
   model's, and a key its ``text_config`` omits takes the text class's default, not the top level's.
2. None stated: 2048, "Assuming the model's maximum length is 2048" (``_get_and_verify_max_len``),
   and a max_model_len the user gives is taken unchecked.
3. RoPE (``_get_and_verify_max_len`` on the text config's ``rope_parameters``, built by transformers
   v5 and patched by vLLM: see ``rope_entries``; an untyped entry is a default rope, a
   contradicting ``type`` or a legacy ``mrope`` without ``mrope_section`` is refused): skipped when
   "gemma3" is in the text model_type; otherwise every rope type but su / longrope / llama3
   multiplies by its ``factor`` (a null one counts 1.0), and ``yarn`` first sets the length to its
   ``original_max_position_embeddings``.
4. The default for a ``longrope`` model is the config's ``original_max_position_embeddings``
   (short factors), not the scaled length; the scaled length stays the limit.
5. A given max_model_len above the derived length is refused unless it is at most the config's
   ``model_max_length``; VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 lets vLLM start with a warning instead.

Not applied, as vLLM does not apply them to a planner's generative model: the sliding-window cap
(only under ``--disable-sliding-window``), the tokenizer's ``model_max_length`` (only for pooling
models with absolute position embeddings), sentence-transformers' ``max_seq_length``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from app.core.config_defaults import TEXT_CONFIG_TYPE
from app.core.errors import InputError
from app.core.hfconfig import HFConfig

#: vLLM's ``possible_keys``, in its order (model_arch_config_convertor.py @28be48fa9).
LENGTH_KEYS = (
    "max_position_embeddings",  # OPT
    "n_positions",  # GPT-2
    "max_seq_len",  # MPT
    "seq_length",  # ChatGLM2
    "model_max_length",  # Command-R
    "max_target_positions",  # Whisper
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)

#: vLLM's length for a config that states none of ``LENGTH_KEYS`` (``_get_and_verify_max_len``).
ASSUMED_MAX_MODEL_LEN = 2048

#: transformers' ALLOWED_LAYER_TYPES: rope_parameters keyed by these is one entry per layer type.
_LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "chunked_attention", "linear_attention"})
_UNSCALED = ("su", "longrope", "llama3")  # rope types whose factor vLLM does not multiply by
_LEGACY_PAIRS = {("su", "longrope"), ("mrope", "default")}  # type / rope_type pairs vLLM lets stand
#: text config classes whose convert_rope_params_to_dict turns rope_type 'mrope' into 'default'
#: (transformers 5.5.3 configuration_qwen2_vl.py / configuration_qwen2_5_vl.py)
_MROPE_TO_DEFAULT = frozenset({"qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text"})


@dataclass(frozen=True)
class MaxLen:
    """What vLLM derives from one config."""

    default: int  # what vLLM starts with when no max_model_len is given
    limit: int | None  # the largest max_model_len vLLM accepts (derived_max_model_len); None: any
    key: str | None  # the config key the limit came from (vLLM's max_len_key); None: none stated
    model_max_length: int | None  # the config's model_max_length, which lets a given length pass

    def accepts(self, max_model_len: int) -> bool:
        """Rule 5: whether vLLM starts a given max_model_len without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."""
        if self.limit is None or max_model_len <= self.limit:
            return True
        return self.model_max_length is not None and max_model_len <= self.model_max_length


def rope_entries(cfg: HFConfig) -> list[dict[str, object]] | None:
    """The text config's RoPE parameters as vLLM sees them, one dict per layer type.

    transformers v5 (vLLM @28be48fa9 is tested with 5.5.3, requirements/test/cuda.txt) builds them
    when it loads the config: ``rope_scaling or rope_parameters``; ``standardize_rope_params`` sets an
    absent ``rope_type`` to the legacy ``type`` or else "default" (so an untyped entry is a default
    rope, its factor still counted below) and gives llama3 / yarn / longrope an
    ``original_max_position_embeddings``: the config's own top-level one first, else the entry's,
    else ``max_position_embeddings``. Qwen2-VL's and Qwen2.5-VL's text classes turn ``mrope`` into
    "default" first. Then vLLM's ``patch_legacy_rope_type`` refuses a ``rope_type`` that contradicts
    ``type``, and a legacy ``mrope`` without ``mrope_section``, and renames su → longrope, mrope →
    default. (Under transformers 4.x, which vLLM also allows, ``patch_legacy_rope_type`` refuses any
    untyped entry instead: "rope_parameters should have a 'rope_type' key".)"""
    raw = cfg.text_get("rope_scaling") or cfg.text_get("rope_parameters")
    if not isinstance(raw, Mapping) or not raw:
        return None  # a default rope (rope_theta only) has no factor: the same length
    nested = set(raw).issubset(_LAYER_TYPES)
    entries = [dict(v) for v in raw.values() if isinstance(v, Mapping)] if nested else [dict(raw)]
    ompe = None if nested else cfg.text_get("original_max_position_embeddings")
    for rp in entries:
        rp.setdefault("rope_type", rp.get("type", "default"))
        if rp["rope_type"] == "mrope" and _text_model_type(cfg) in _MROPE_TO_DEFAULT:
            rp["rope_type"] = "default"
        if rp["rope_type"] in ("llama3", "yarn", "longrope"):
            if ompe is not None:
                rp["original_max_position_embeddings"] = ompe
            else:
                rp.setdefault("original_max_position_embeddings", cfg.text_get("max_position_embeddings"))
        _patch_legacy(rp)
    return entries


def _patch_legacy(rp: dict[str, object]) -> None:
    """vLLM's ``patch_legacy_rope_type`` on one entry (vllm/transformers_utils/config.py @28be48fa9)."""
    rope_type, legacy = rp["rope_type"], rp.get("type")
    if legacy is not None and rope_type != legacy and (legacy, rope_type) not in _LEGACY_PAIRS:
        raise InputError("model.config.rope_scaling", f"states rope_type {rope_type!r} and type {legacy!r}; vLLM "
                         "refuses the conflict ('You should only specify one of them')")  # fmt: skip
    if rope_type == "mrope" and "mrope_section" not in rp:
        raise InputError("model.config.rope_scaling", "states the legacy rope_type 'mrope' without mrope_section; "
                         "vLLM refuses it (\"Legacy rope_type 'mrope' requires 'mrope_section'\")")  # fmt: skip
    rp["rope_type"] = {"su": "longrope", "mrope": "default"}.get(str(rope_type), rope_type)


def _number(rp: Mapping[str, object], key: str) -> float:
    value = rp.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InputError(f"model.config.rope_scaling.{key}", f"a positive number is required (got {value!r})")
    return float(value)


def _text_model_type(cfg: HFConfig) -> str:
    top = str(cfg.top.get("model_type") or "")
    return str(cfg.text.get("model_type") or (TEXT_CONFIG_TYPE.get(top, top) if cfg.nested else top))


def _scaled(cfg: HFConfig, derived: float, entries: list[dict[str, object]] | None) -> float:
    """Rule 3: the length after RoPE scaling (vLLM multiplies after the loop, once)."""
    if entries is None or "gemma3" in _text_model_type(cfg):
        return derived
    factor: float | None = 1.0
    for rp in entries:
        if rp["rope_type"] in _UNSCALED:
            continue
        if "factor" in rp:  # rp.get("factor", scaling_factor): a stated null is kept, then counts 1.0
            factor = None if rp["factor"] is None else _number(rp, "factor")
        if rp["rope_type"] == "yarn":
            derived = _number(rp, "original_max_position_embeddings")
    return derived * (1.0 if factor is None else factor)


def derive_max_len(cfg: HFConfig) -> MaxLen:
    """vLLM's default and limit for max_model_len from this config (rules 1-4 above)."""
    stated = {key: v for key in LENGTH_KEYS if (v := cfg.text_int_or_none(key)) is not None}
    key = min(stated, key=lambda k: stated[k]) if stated else None  # the first of equal ones, as vLLM keeps
    derived = float(stated[key]) if key else math.inf
    model_max_length = stated.get("model_max_length")
    if model_max_length:
        key, derived = "model_max_length", float(model_max_length)
    entries = rope_entries(cfg)
    scaled = _scaled(cfg, derived if key else float(ASSUMED_MAX_MODEL_LEN), entries)
    default = int(scaled)
    if entries is not None and any(rp["rope_type"] == "longrope" for rp in entries):
        default = cfg.text_int_or_none("original_max_position_embeddings") or default
    return MaxLen(default=default, limit=int(scaled) if key else None, key=key, model_max_length=model_max_length)


def check_max_model_len(field: str, max_model_len: int, max_len: MaxLen) -> None:
    """Rule 5: refuse a given max_model_len above what vLLM accepts for this model."""
    if not max_len.accepts(max_model_len):
        raise InputError(field, refusal(max_model_len, max_len))


def refusal(max_model_len: int, max_len: MaxLen) -> str:
    """What vLLM's refusal of a max_model_len it does not accept says, in our words."""
    return (
        f"{max_model_len:,} is more than the model's derived maximum length {max_len.limit:,} "
        f"({max_len.key} in its config.json, as vllm/config/model.py _get_and_verify_max_len derives it); "
        "vLLM refuses it unless started with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
        "(positions past the trained length give nan or out-of-bounds errors)"
    )


def long_length_note(max_model_len: int, max_len: MaxLen) -> str | None:
    """Rule 5 with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: vLLM starts a max_model_len above what it accepts with
    a warning instead of the refusal (``logger.warning_once("%s %s", msg, warning)``), said in our words;
    None when the length is not above it (no warning is printed)."""
    limit = max_len.limit
    if limit is not None and not max_len.accepts(max_model_len):
        return (f"max_model_len {max_model_len:,} is more than the model's derived maximum length {limit:,} "
                f"({max_len.key} in its config.json): planned as vLLM starts it with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, "
                "which warns instead of refusing. vLLM's warning: use it with extreme caution; a model with rotary "
                f"position embeddings (RoPE) gives nan at positions past {limit:,}, one with absolute position "
                "embeddings a CUDA out-of-bounds error (vllm/config/model.py _get_and_verify_max_len @28be48fa9). "
                "The KV cache is sized for the longer length; whether the model's output holds up there this plan "
                "cannot tell")  # fmt: skip
    return None

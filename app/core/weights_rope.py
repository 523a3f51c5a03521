"""The rotary caches vLLM registers while it builds a model (counted in "Model loading took").

``RotaryEmbedding.__init__`` (vllm/model_executor/layers/rotary_embedding/base.py, @4dd49b06f ≈
v0.19.0) computes a ``cos_sin_cache`` of [rows, rotary_dim] and keeps it in the model dtype as a
non-persistent buffer; ``get_rope`` (rotary_embedding/__init__.py) builds one per distinct rope
(head size, rotary dim, max_position, rope parameters) and shares it between the layers. How many
rows, per rope type (the class ``get_rope`` picks for ``rope_type``):

- default, ``llama3``, ``ntk``, dynamic with ``alpha``: ``max_position`` rows.
- ``linear`` (``LinearScalingRotaryEmbedding._compute_cos_sin_cache``): one block of
  ``max_position × factor`` rows per scaling factor, concatenated. Gemma-3's global layers
  (factor 8) hold 8 × 131072 rows; its local (sliding) layers a default rope of their own
  (models/gemma3.py ``Gemma3Attention.__init__``: ``rope_local_base_freq``).
- ``dynamic`` with ``factor`` (``DynamicNTKScalingRotaryEmbedding``): ``max_position × factor``.
- ``yarn``, ``deepseek_yarn`` (``YaRNScalingRotaryEmbedding`` / ``DeepseekScalingRotaryEmbedding``):
  ``original_max_position_embeddings × factor``.
- ``longrope`` (``Phi3LongRoPEScaledRotaryEmbedding``): a short cache of the original length and a
  long one of ``max_position``, concatenated.
- multimodal rope (``mrope_section`` in the rope parameters: ``MRotaryEmbedding.__init__``,
  rotary_embedding/mrope.py, since ``bf3b79efb`` "[VLM] Qwen2.5-VL" (2025-02-05, v0.7.2) to @4dd49b06f): "we enlarge
  max_position_embeddings to 4 times" — 4 × the rows the rope type gives. The Qwen2-VL /
  Qwen2.5-VL / Qwen3-VL families always run with it (their checkpoints state ``mrope_section``;
  a config copy that leaves it out is read as theirs).
"""

from __future__ import annotations

from collections.abc import Mapping

from app.core.hfconfig import HFConfig

# Text model types whose vLLM class takes M-RoPE positions (SupportsMRoPE).
MROPE_MODEL_TYPES = frozenset(
    {"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text",
     "qwen3_vl_moe_text", "qwen2_5_omni", "qwen3_omni_moe"}
)  # fmt: skip


def _num(params: Mapping[str, object], key: str, default: float) -> float:
    value = params.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else default


def rope_rows(params: Mapping[str, object] | None, max_position: int, mrope: bool = False) -> int:
    """Rows of the cos/sin cache ``get_rope`` builds for these rope parameters (module docstring)."""
    params = params or {}
    kind = str(params.get("rope_type") or params.get("type") or "default")
    original = int(_num(params, "original_max_position_embeddings", max_position))
    rows = max_position
    if kind == "linear":
        raw = params.get("factor")
        factors = raw if isinstance(raw, list | tuple) else [raw]
        rows = sum(int(max_position * _num({"f": f}, "f", 1.0)) for f in factors)
    elif kind == "dynamic" and "alpha" not in params:
        rows = int(max_position * _num(params, "factor", 1.0))
    elif kind in ("yarn", "deepseek_yarn", "deepseek_llama_scaling"):
        rows = int(original * _num(params, "factor", 1.0))
    elif kind == "longrope":
        rows = original + max_position
    if mrope or "mrope_section" in params:
        rows = 4 * (int(original * _num(params, "factor", 1.0)) if kind == "yarn" else max_position)
    return rows


def rope_max_position(cfg: HFConfig, shape_max_position: int | None) -> int:
    """The ``max_position`` vLLM's model passes ``get_rope``: its text config's ``max_position_embeddings``
    (``hf_text_config``, vllm/transformers_utils/config.py ``get_hf_text_config`` @28be48fa9), the text
    class's default where the text config omits it, never a multimodal config's top-level key (the
    shape's length falls back to it). A flat config: the shape's (n_positions, seq_length too)."""
    if cfg.nested:
        own = cfg.text_int_or_none("max_position_embeddings")
        if own is not None:
            return own
    return shape_max_position or 0


def rope_cache_rows(cfg: HFConfig, max_position: int) -> tuple[int, ...]:
    """Rows of every distinct rotary cache the model builds (one per distinct rope).

    The rope parameters are the text config's as vLLM sees them (``app.core.max_len.rope_entries``,
    the reading the length uses: ``rope_scaling or rope_parameters`` of the text config alone, the
    legacy ``type`` patched, and a llama3 / yarn / longrope entry given the text config's own
    ``original_max_position_embeddings``, as transformers v5's ``standardize_rope_params`` does);
    before, ``rope_parameters`` won over ``rope_scaling`` and an ``original_max_position_embeddings``
    beside the entry was not read."""
    from app.core.max_len import rope_entries

    entries = rope_entries(cfg)
    model_type = cfg.model_type()
    mrope = model_type in MROPE_MODEL_TYPES or str(cfg.top.get("model_type") or "") in MROPE_MODEL_TYPES
    if model_type.startswith("gemma3"):
        raw = cfg.text_get("rope_scaling") or cfg.text_get("rope_parameters")
        if isinstance(raw, Mapping) and isinstance(raw.get("full_attention"), Mapping):  # transformers v5
            return tuple(rope_rows(p, max_position) for p in entries or ())
        return (max_position, rope_rows(entries[0] if entries else None, max_position))  # local + global
    if not entries:
        return (rope_rows(None, max_position, mrope),)
    distinct = list({repr(sorted(e.items())): e for e in entries}.values())
    return tuple(rope_rows(e, max_position, mrope) for e in distinct)

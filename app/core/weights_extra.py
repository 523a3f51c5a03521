"""Tensors outside the decoder layers: embeddings, LM head, final norm, rotary caches, vision tower.

- ``embed_tokens``: VocabParallelEmbedding on the first pipeline stage; ``lm_head``: ParallelLMHead
  on the last (models/llama.py ``LlamaModel.__init__`` / ``LlamaForCausalLM.__init__``). Tied
  embeddings share one tensor on a single stage; with PP > 1 the last stage builds its own
  ``embed_tokens`` for the tie (``is_first_rank or (tie_word_embeddings and is_last_rank)``).
- Rotary caches: ``RotaryEmbedding.__init__`` (rotary_embedding/base.py) registers a
  ``cos_sin_cache`` buffer of max_position × rotary_dim in the model dtype, one per distinct
  rope (``get_rope`` caches them); Gemma-3 has a local and a global rope. Measured: Llama-3.1-8B
  logs 14.9888 GiB = 8,030,261,248 parameters × 2 B + 131072 × 128 × 2 B exactly (file 01).
- Vision tower: blocks of QKV/proj/fc1/fc2 that vLLM's vision encoders build as column/row-
  parallel linears (models/qwen3_vl.py ``Qwen3_VisionBlock``, siglip.py, … with
  ``mm_encoder_tp_mode="weights"``, the default); patch and position embeddings and norms whole.
  It lives on the first pipeline stage. ``mm_encoder_tp_mode="data"`` (replicated) is not modelled.
- MTP / next-token-prediction layers (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``)
  are loaded only with speculative decoding: not counted, noted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from app.core.hfconfig import HFConfig

if TYPE_CHECKING:
    from app.core.weights_build import Tensor, _Builder


def _rope_caches(b: _Builder) -> list[Tensor]:
    cfg, s = b.cfg, b.shape
    if not s.attention_layers or cfg.get("position_embedding_type") in ("alibi", "absolute"):
        return []
    max_pos = s.max_position_embeddings or 0
    factor = cfg.get("partial_rotary_factor")
    rope_dim = cfg.int_or_none("qk_rope_head_dim") if s.is_mla else None
    rotary = rope_dim or int(s.head_dim * (float(factor) if isinstance(factor, int | float) else 1.0))
    if s.model_type in ("falcon_mamba", "mamba") or not max_pos or not rotary:
        return []
    n = 2 if (s.model_type or "").startswith("gemma3") else 1
    return [b.t("rotary_emb.cos_sin_cache", "rope", n * max_pos, rotary, "rep")]


def edge_tensors(b: _Builder) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...], tuple[Tensor, ...]]:
    """(first-stage, last-stage, every-stage) tensors."""
    s = b.shape
    vocab, h = s.vocab_size or 0, s.hidden_size
    embed = b.t("model.embed_tokens", "embedding", vocab, h, "vocab")
    head = b.t("lm_head", "lm_head", vocab, h, "vocab", quant="linear" if _lm_head_quantized(b) else "")
    last = [b.t("model.norm", "norms", h, 1, "rep"), head]
    _note_mtp(b)
    return (embed,), tuple(last), tuple(_rope_caches(b))


def _lm_head_quantized(b: _Builder) -> bool:
    qc = b.cfg.top.get("quantization_config")
    return isinstance(qc, Mapping) and bool(qc.get("lm_head"))  # GPTQ/AWQ "lm_head": true


def _note_mtp(b: _Builder) -> None:
    n = b.cfg.int_or_none("num_nextn_predict_layers", "mtp_num_hidden_layers") or 0
    if n:
        b.notes.append(f"{n} MTP layer(s) in the checkpoint not counted: vLLM loads them only for speculative decoding")


def vision_tensors(b: _Builder) -> tuple[Tensor, ...]:
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
    mergers = 1 + (len(deepstack) if isinstance(deepstack, list) else 0)
    blk = "visual.blocks"
    out = [
        b.t(f"{blk}.attn.qkv", "vision", 3 * w, w + 1, "col", quant="linear", count=depth),
        b.t(f"{blk}.attn.proj", "vision", w, w, "row", quant="linear", count=depth),
        b.t(f"{blk}.mlp.linear_fc1", "vision", inter, w + 1, "col", quant="linear", count=depth),
        b.t(f"{blk}.mlp.linear_fc2", "vision", w, inter, "row", quant="linear", count=depth),
        b.t(f"{blk}.norms+biases", "vision", 6 * w, 1, "rep", count=depth),
        b.t("visual.patch_embed+pos_embed", "vision", chans * patch * patch + positions + 1, w, "rep"),
        b.t("visual.merger.linear_fc1", "vision", merge, merge + 1, "col", quant="linear", count=mergers),
        b.t("visual.merger.linear_fc2", "vision", out_dim, merge + 1, "row", quant="linear", count=mergers),
        b.t("visual.merger.norm", "vision", 2 * merge, 1, "rep", count=mergers),
    ]
    b.notes.append("vision tower from vision_config (blocks, patch/position embeddings, mergers), TP-sharded")
    return tuple(out)

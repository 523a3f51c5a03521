"""The multimodal encoder cache vLLM budgets for a vision model, and its part of the profile peak.

vLLM V1 (read at 28be48fa9, 2026-05-24):

- ``compute_mm_encoder_budget`` (vllm/v1/core/encoder_cache_manager.py; ``compute_encoder_budget``
  before the rename) gives the encoder's compute budget ``max(max_num_encoder_input_tokens,
  max_tokens_per_mm_item)`` and the cache's size ``max(encoder_cache_size, max_tokens_per_mm_item)``
  in tokens, where ``SchedulerConfig`` sets both inputs to ``max_num_batched_tokens``
  (vllm/config/scheduler.py). The "max(…, one item)" autotune is PR #11895 (70755e819, 2025-01-15,
  taken as v0.7.0); PR #11210 (2024-12-16) had both at a fixed 16,384. V0 keeps no encoder cache.
- ``MultiModalBudget`` (vllm/multimodal/encoder_budget.py): ``get_encoder_budget() = min(compute, cache)``;
  the profile runs ``max(1, min(budget // tokens_per_item, max_num_seqs × items_per_prompt))`` dummy
  items of the modality with the most tokens per item, items_per_prompt = ``max(1, min(limit,
  max_model_len // tokens_per_item))``.
- ``GPUModelRunner.profile_run`` (vllm/v1/worker/gpu_model_runner.py) logs "Encoder cache will be
  initialized with a budget of N tokens, and profiled with K image items of the maximum feature
  size.", keeps the K outputs in ``encoder_cache`` through the text forward, then clears it: the cache
  is not a separate allocation but part of the activation peak the KV budget subtracts
  (``app.core.vision.encoder_profile_bytes`` prices the outputs and the encoder step).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.versions import Version
from app.core.vision import VisionGeometry, encoder_profile_bytes

V1_DEFAULT_SINCE: Version = (0, 8, 0)  # the VLLM_USE_V1 oracle (app.core.estimates.EstimateContext.uses_v1)


@dataclass(frozen=True)
class EncoderCacheTerms:
    max_tokens_per_item: int
    compute_budget_tokens: int
    cache_size_tokens: int
    items_profiled: int
    cache_bytes: int  # the profiled items' outputs held through the text forward (on one rank)
    encoder_peak_bytes: int  # the profile's peak with the encoder step (app.core.vision)
    per_token_bytes: int  # one cached embedding: text hidden × dtype × (1 + deepstack levels)
    note: str


def encoder_cache_terms(
    geo: VisionGeometry, max_num_batched_tokens: int, tp: int, dtype_bytes: int, version: Version,
    max_model_len: int | None = None,
) -> EncoderCacheTerms | None:
    """The encoder cache's budget and bytes for one rank; None where vLLM keeps none (V0 engines,
    the default before v0.8.0; V1 before the autotune, v0.7.x, is taken with the autotune)."""
    if version < V1_DEFAULT_SINCE:
        return None
    tokens = geo.tokens_per_item
    compute = cache = max(max_num_batched_tokens, tokens)
    items = max(1, min(compute, cache) // tokens)  # the decoder-side cap (max_num_seqs × per prompt) rarely binds
    # The peak (and what it keeps through the text forward: the cache plus, per version, the dummy
    # pixels and scattered copies) is the estimator's (app.core.vision); the cache itself is the
    # profiled items' embeddings.
    peak, _kept, note = encoder_profile_bytes(geo, max_num_batched_tokens, tp, dtype_bytes, version, max_model_len)
    per_token = geo.out_hidden * dtype_bytes * (1 + geo.deepstack)
    cache_bytes = items * tokens * per_token
    why = (
        f"encoder cache budget max(max_num_batched_tokens {max_num_batched_tokens:,}, one item {tokens:,}) = "
        f"{cache:,} tokens; profiled with {items} item(s); {note}"
    )
    return EncoderCacheTerms(tokens, compute, cache, items, cache_bytes, peak, per_token, why)

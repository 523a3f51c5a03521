"""Async scheduling and the tokens in flight per request that sliding-window KV groups are charged.

vLLM (read at 28be48fa9, 2026-05-24, and after it where cited):

- ``SlidingWindowSpec.max_admission_blocks_per_request`` (vllm/v1/kv_cache_interface.py, PR #40946,
  7b1bc0a3e) is the one per-request bound that startup pool sizing (``max_memory_usage_bytes``) and
  the runtime admission gate share: ``cdiv(min(sliding_window − 1 + N, max_model_len), block_size) + 1``
  blocks, ``ChunkedLocalAttentionSpec`` ``cdiv(min(attention_chunk_size + N, max_model_len), block_size)``.
  Up to the mirror's end ``N`` is ``max_num_batched_tokens``.
- Release 0.26.0 renamed the argument ``max_in_flight_tokens`` and passes
  ``max_concurrent_batches × max_num_batched_tokens`` (the scheduler runs that many batches ahead of
  the GPU, whose KV the window must still hold: PR #47728 frees out-of-window blocks on the
  processed-token basis). Sources: the review of tenstorrent/tt-xla PR #5908 (2026-08-07, "the 0.26.0
  uplift renamed this arg … max_in_flight_tokens = max_concurrent_batches * max_num_batched_tokens")
  and vLLM issue #54703 (2026-09-01, "with async scheduling, max_in_flight_tokens = 2 *
  max_num_batched_tokens", numbers reproduced through vLLM's own get_kv_cache_configs).
- ``max_concurrent_batches`` (vllm/v1/executor/multiproc_executor.py, ray_executor.py,
  uniproc_executor.py): ``2 if pp_size <= 1 and async_scheduling else pp_size``.
- Async scheduling is on by default since PR #27614 (c2ff33cc8, 2025-12-29, taken as v0.14.0) unless
  an option is incompatible (``VllmConfig.__post_init__``, vllm/config/vllm.py): speculative decoding
  other than the EAGLE/MTP kinds and GPU n-gram is one (PR #31998 enabled it with those), so a
  ``draft_model`` or (CPU) ``ngram`` draft turns it off; pooling models are not planned here.
"""

from __future__ import annotations

from app.core.versions import Version

IN_FLIGHT_SINCE: Version = (0, 26, 0)  # max_in_flight_tokens = max_concurrent_batches × max_num_batched_tokens
ASYNC_DEFAULT_SINCE: Version = (0, 14, 0)  # PR #27614: async scheduling on unless incompatible
_ASYNC_OFF_METHODS = frozenset({"draft_model", "ngram"})  # not EagleModelTypes / NgramGPUTypes


def default_async_scheduling(version: Version, spec_method: str | None = None) -> bool:
    """Whether vLLM turns async scheduling on when ``--async-scheduling`` is not given."""
    return version >= ASYNC_DEFAULT_SINCE and spec_method not in _ASYNC_OFF_METHODS


def async_scheduling_on(given: bool | None, version: Version, spec_method: str | None = None) -> bool:
    """The async-scheduling setting vLLM runs with: the plan's, else the version's default."""
    return given if given is not None else default_async_scheduling(version, spec_method)


def concurrent_batches(version: Version, pp: int, async_on: bool) -> int:
    """How many batches of ``max_num_batched_tokens`` the sliding-window bound holds per request:
    vLLM's ``max_concurrent_batches`` from 0.26.0 on, one before."""
    if version < IN_FLIGHT_SINCE:
        return 1
    return 2 if pp <= 1 and async_on else pp

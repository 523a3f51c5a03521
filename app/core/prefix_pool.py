"""Prefix caching as part of the pool: running blocks and retained blocks share one block pool (issue 15, item 6).

vLLM V1 has one ``BlockPool`` (vllm/v1/core/block_pool.py): a request's blocks are *running* while it
holds them; when it finishes they go back to the free queue, and with prefix caching on they keep their
block hash there (*retained*: a later request with the same prefix hits them) until the allocator hands
them out again (eviction, LRU). With prefix caching off a freed block keeps nothing. So at a planned
load, the pool splits into the blocks the running requests hold and the rest, which is what retention
can use:

    running_blocks  = concurrency × cdiv(avg_live_tokens, block_size)
    retained_blocks = usable_blocks − running_blocks      (0 with prefix caching off)
    retention_share = retained_blocks / usable_blocks

``usable_blocks`` leaves out vLLM's null block (``BlockPool``, PR #14097). Conservation:
``running + retained + idle == usable`` where ``idle`` is the blocks no one can retain (all of the free
blocks with prefix caching off).

Default: ``enable_prefix_caching`` is on in V1 for generative models (``CacheConfig.enable_prefix_caching
= True``, vllm/config/cache.py; ``EngineArgs._set_default_chunked_prefill_and_prefix_caching_args`` takes
``ModelConfig.is_prefix_caching_supported``, vllm/engine/arg_utils.py @28be48fa) and off in V0 (before
v0.8.0, where V1 became the default engine).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.kvrank import cdiv

V1_SINCE = (0, 8, 0)


def default_prefix_caching(version: tuple[int, int, int]) -> bool:
    """vLLM's default for ``--enable-prefix-caching`` at ``version`` (generative models)."""
    return version >= V1_SINCE


@dataclass(frozen=True)
class PrefixPool:
    enable_prefix_caching: bool
    usable_blocks: int
    concurrency: int | None  # requests the plan runs at once (None: no avg_live_tokens, no load)
    blocks_per_request: int | None
    running_blocks: int | None
    retained_blocks: int | None
    idle_blocks: int | None

    @property
    def retention_share(self) -> float | None:
        if self.retained_blocks is None or self.usable_blocks <= 0:
            return None
        return self.retained_blocks / self.usable_blocks


def prefix_pool(enabled: bool, blocks: int, null_block: bool, block_size: int,
                concurrency: int | None, avg_live_tokens: int | None) -> PrefixPool:
    """Split the binding rank's pool into running and retained blocks at the plan's load."""
    usable = max(0, blocks - 1) if null_block else max(0, blocks)
    if concurrency is None or not avg_live_tokens:
        return PrefixPool(enabled, usable, None, None, None, None, None)
    per_request = cdiv(avg_live_tokens, block_size)
    running = min(usable, concurrency * per_request)
    free = usable - running
    retained = free if enabled else 0
    return PrefixPool(enabled, usable, concurrency, per_request, running, retained, free - retained)

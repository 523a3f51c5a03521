"""The per-rank KV geometry records and vLLM's admission arithmetic over them (see kvspec.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import floordiv, mul

from app.core.errors import InputError
from app.core.layers import STATE_KINDS, LayerKind

_UNBOUNDED_LEN = 1 << 31


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class KVGroup:
    """One vLLM KV-cache group as it lands on this rank (layers of one spec sharing a block table)."""

    kind: LayerKind
    num_layers: int  # layers of this group on this rank (may be 0 on a PP stage, or < group_size)
    page_bytes_per_layer: int  # bytes one block costs in one layer (Mamba pages padded)
    block_size: int  # tokens per block (attention block size; Mamba groups hold one state per block)
    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    layer_indices: tuple[int, ...] = ()  # global decoder-layer indices on this rank

    def blocks_per_request(
        self, max_model_len: int, max_num_batched_tokens: int, dcp: int = 1, in_flight_batches: int = 1
    ) -> int:
        """vLLM ``max_memory_usage_bytes`` of this spec, in pages (kv_cache_interface.py). Sliding and
        chunked groups hold ``in_flight_batches × max_num_batched_tokens`` in-flight tokens beside the
        window (``max_in_flight_tokens``, vLLM ≥ 0.26: app.core.in_flight)."""
        bs = self.block_size
        max_num_batched_tokens *= in_flight_batches
        if self.kind in ("full", "mla"):
            return cdiv(cdiv(max_model_len, dcp), bs)
        if self.kind == "sliding" and self.sliding_window is not None:
            return cdiv(min(self.sliding_window - 1 + max_num_batched_tokens, max_model_len), bs) + 1
        if self.kind == "chunked" and self.attention_chunk_size is not None:
            return cdiv(min(self.attention_chunk_size + max_num_batched_tokens, max_model_len), bs)
        if self.kind in STATE_KINDS:
            return 1  # MambaSpec, mamba_cache_mode "none", no speculative blocks
        return 0


@dataclass(frozen=True)
class RankKV:
    """The KV-cache geometry of one rank (the tight PP stage unless built per stage)."""

    tp: int
    pp: int
    dcp: int
    stage: int
    layers_on_rank: int
    kv_heads_per_rank: int
    kv_bytes_per_token: int
    block_size: int
    page_bytes: int
    mamba_state_bytes_per_request: int
    groups: tuple[KVGroup, ...]
    kv_cache_dtype: str
    group_size: int = 1  # layers sharing one pool tensor (vLLM's num_layers in get_num_blocks)
    page_bytes_per_layer: int = 0
    max_model_len_limit: int | None = None  # upper bound of largest_max_model_len's search
    mamba_page_padding_pct: float | None = None
    notes: tuple[str, ...] = field(default=())
    # Batches of max_num_batched_tokens a sliding/chunked group holds in flight (app.core.in_flight)
    in_flight_batches: int = 1

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def is_hybrid(self) -> bool:
        return len(self.groups) > 1

    def blocks_for(self, kv_bytes: int) -> int:
        """vLLM ``get_num_blocks``: ``kv_bytes // page // group_size`` (never negative)."""
        if self.page_bytes <= 0 or kv_bytes <= 0:
            return 0
        return kv_bytes // self.page_bytes_per_layer // self.group_size

    def raw_tokens(self, kv_bytes: int) -> int | None:
        """Token positions ``kv_bytes`` hold before rounding to whole blocks, the pool split among the
        KV-cache groups as vLLM splits it: ``max(0, kv) × block_size × dcp // (page_bytes × groups)``.

        For one full-attention group this is ``kv // kv_bytes_per_token`` (× dcp); for hybrid models
        it counts the bytes the Mamba/GDN and sliding-window groups take too (the same physical
        quantity as for other models), so ``tokens ≤ raw < tokens + block_size × dcp``.
        None for attention-free models (no token-sized pages).
        """
        if self.kv_bytes_per_token <= 0 or self.page_bytes <= 0 or not self.groups:
            return None
        return max(0, kv_bytes) * self.block_size * self.dcp // (self.page_bytes * self.n_groups)

    def tokens_for_blocks(self, blocks: int) -> int:
        """vLLM's logged "GPU KV cache size" (v0.9.1 … 2026-04): blocks // n_groups × block_size × dcp.

        For one full-attention group this is the physical token capacity ``blocks × block_size``.
        (Attention-free Mamba models: vLLM's Mamba block size is max_model_len there, so the printed
        figure is ``blocks × max_model_len`` = ``kv_cache_size_tokens``; this method uses block_size.)
        """
        if blocks <= 0 or not self.groups:
            return 0
        return blocks // self.n_groups * self.block_size * self.dcp

    def raw_tokens_column(self, kv_bytes: Sequence[int]) -> list[int | None]:
        """`raw_tokens` of every rank's KV bytes (one list comprehension, the same formula)."""
        if self.kv_bytes_per_token <= 0 or self.page_bytes <= 0 or not self.groups:
            return [None] * len(kv_bytes)
        per, div = self.block_size * self.dcp, self.page_bytes * self.n_groups
        if kv_bytes and min(kv_bytes) > 0:  # no rank short of KV: C-level passes, the same formula
            return list(map(floordiv, map(mul, kv_bytes, repeat(per)), repeat(div)))
        return [kv * per // div if kv > 0 else 0 for kv in kv_bytes]

    def tokens_column(self, blocks: Sequence[int]) -> list[int]:
        """`tokens_for_blocks` of every rank's blocks (one list comprehension, the same formula)."""
        if not self.groups:
            return [0] * len(blocks)
        groups, per = self.n_groups, self.block_size * self.dcp
        if blocks and min(blocks) > 0:
            return list(map(mul, map(floordiv, blocks, repeat(groups)), repeat(per)))
        return [b // groups * per if b > 0 else 0 for b in blocks]

    def per_request_blocks(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """Blocks one ``max_model_len`` request can need in the worst case (Σ over all groups)."""
        positive("engine.max_model_len", max_model_len)
        positive("engine.max_num_batched_tokens", max_num_batched_tokens)
        return sum(
            g.blocks_per_request(max_model_len, max_num_batched_tokens, self.dcp, self.in_flight_batches)
            for g in self.groups
        )

    def per_request_bytes(self, max_model_len: int, max_num_batched_tokens: int) -> int:
        """vLLM's one-request need on this rank (``_max_memory_usage_bytes_from_groups``)."""
        return self.per_request_blocks(max_model_len, max_num_batched_tokens) * self.page_bytes

    def max_concurrency(self, blocks: int, max_model_len: int, max_num_batched_tokens: int) -> float:
        """vLLM's printed "Maximum concurrency" (``get_max_concurrency_for_kv_cache_config``, ≥ v0.9.1)."""
        return concurrency(blocks, self.per_request_blocks(max_model_len, max_num_batched_tokens))

    def kv_cache_size_tokens(self, blocks: int, max_model_len: int, max_num_batched_tokens: int) -> int:
        """vLLM's derived "GPU KV cache size" since 2026-04-28 (PR #41069): int(concurrency × mml)."""
        concurrency = self.max_concurrency(blocks, max_model_len, max_num_batched_tokens)
        return 0 if math.isinf(concurrency) else int(concurrency * max_model_len)

    def fits(self, kv_bytes: int, max_model_len: int, max_num_batched_tokens: int) -> bool:
        """Whether vLLM's start-up check (``_check_enough_kv_cache_memory``) passes on this rank."""
        return kv_bytes > 0 and self.per_request_bytes(max_model_len, max_num_batched_tokens) <= kv_bytes

    def largest_max_model_len(self, kv_bytes: int, max_num_batched_tokens: int, upper: int | None = None) -> int:
        """vLLM's binary search (``_estimate_max_model_len_from_groups``): the largest length in
        [1, upper] whose one-request need fits ``kv_bytes``; 0 when even one token does not fit.
        ``upper`` defaults to the model's max_position_embeddings (vLLM searches up to max_model_len).

        When every group is full attention (or MLA) with one block size, the need is
        ``n_groups × ceil(ceil(L / dcp) / block_size) × page`` and the answer has a closed form
        (every slider tick asks this); other specs run the search.
        """
        right = upper if upper is not None else (self.max_model_len_limit or _UNBOUNDED_LEN)
        positive("upper", right)
        closed = self._largest_full_attention_len(kv_bytes, max_num_batched_tokens, right)
        return closed if closed is not None else self.search_max_model_len(kv_bytes, max_num_batched_tokens, right)

    def _largest_full_attention_len(self, kv_bytes: int, max_num_batched_tokens: int, upper: int) -> int | None:
        """The closed form of the search for full-attention/MLA-only specs; None for other specs.

        fits(L) ⇔ n × c(L) × page ≤ kv with c(L) = ceil(ceil(L / dcp) / bs), so with
        B = kv // (n × page): c(L) ≤ B ⇔ L ≤ B × bs × dcp.
        """
        groups = self.groups
        if not groups or self.page_bytes <= 0:
            return None
        block_size = groups[0].block_size
        if any(g.kind not in ("full", "mla") or g.block_size != block_size for g in groups):
            return None
        positive("engine.max_num_batched_tokens", max_num_batched_tokens)
        if kv_bytes <= 0:
            return 0
        whole_requests = kv_bytes // (len(groups) * self.page_bytes)
        return min(upper, whole_requests * block_size * self.dcp)

    def search_max_model_len(self, kv_bytes: int, max_num_batched_tokens: int, upper: int) -> int:
        """The binary search itself (any spec): the largest L in [1, upper] that ``fits``, else 0."""
        positive("upper", upper)
        left, right = 1, upper
        if not self.fits(kv_bytes, left, max_num_batched_tokens):
            return 0
        result = 1
        while left <= right:
            mid = (left + right) // 2
            if self.fits(kv_bytes, mid, max_num_batched_tokens):
                result, left = mid, mid + 1
            else:
                right = mid - 1
        return result


def concurrency(blocks: int, per_request_blocks: int) -> float:
    """Whole worst-case requests a pool of ``blocks`` holds (vLLM's "Maximum concurrency")."""
    return math.inf if per_request_blocks == 0 else max(blocks, 0) / per_request_blocks


def positive(field_name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(field_name, f"must be a positive integer, got {value!r}")

"""Static rectangular batches versus paged blocks (seed 002).

A static batch allocates every sequence at the length of the longest one; paged attention
allocates ceil(length / block_size) blocks per sequence, wasting only the tail of the last.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import InputError

MAX_BLOCK_SIZE = 4096  # the plan document's engine.block_size bound (app.schemas.EngineDoc)
MAX_LENGTH = 10**9  # tokens per sequence: the plan document's token bound (app.schemas.MAX_TOKENS)


@dataclass(frozen=True)
class PaddingComparison:
    sequences: int
    real_tokens: int
    padded_slots: int
    padded_waste_factor: float
    paged_blocks: int
    paged_slots: int
    paged_waste_tokens: int
    paged_waste_fraction: float
    block_size: int


def compare_padding(lengths: list[int] | tuple[int, ...], block_size: int = 16) -> PaddingComparison:
    """Slots used by a padded batch and by 16-token blocks for the same sequence lengths."""
    if not lengths:
        raise InputError("lengths", "give at least one sequence length")
    if not 0 < block_size <= MAX_BLOCK_SIZE:
        raise InputError("block_size", f"must be 1 … {MAX_BLOCK_SIZE:,} tokens, got {block_size}")
    for i, n in enumerate(lengths):
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_LENGTH:
            raise InputError(f"lengths[{i}]", f"must be a whole number of tokens, 1 … {MAX_LENGTH:,}, got {n!r}")
    real = sum(lengths)
    padded = len(lengths) * max(lengths)
    blocks = sum(-(-n // block_size) for n in lengths)
    paged = blocks * block_size
    return PaddingComparison(
        sequences=len(lengths),
        real_tokens=real,
        padded_slots=padded,
        padded_waste_factor=padded / real,
        paged_blocks=blocks,
        paged_slots=paged,
        paged_waste_tokens=paged - real,
        paged_waste_fraction=(paged - real) / paged,
        block_size=block_size,
    )

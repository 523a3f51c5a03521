"""Static rectangular batches versus paged blocks (seed 002).

A static batch allocates every sequence at the length of the longest one; paged attention
allocates ceil(length / block_size) blocks per sequence, wasting only the tail of the last.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import InputError


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
    if block_size <= 0:
        raise InputError("block_size", f"must be a positive number of tokens, got {block_size}")
    for i, n in enumerate(lengths):
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise InputError(f"lengths[{i}]", f"must be a positive whole number of tokens, got {n!r}")
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

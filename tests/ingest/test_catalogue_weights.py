"""Catalogue weights: the tensor-by-tensor count against each checkpoint's pinned safetensors total_size."""

from __future__ import annotations

import pytest

from app.core.model_config import shape_from_config
from app.core.weights import weights_per_rank
from app.ingest.catalogue import list_models

PINNED = [m for m in list_models() if m.index_total_bytes]


def test_the_pinned_totals_are_there() -> None:
    assert len(PINNED) >= 10
    assert all(m.index_source for m in PINNED)


@pytest.mark.parametrize("entry", PINNED, ids=lambda m: m.slug)
def test_tensor_shapes_add_up_to_the_checkpoints_total_size(entry) -> None:  # type: ignore[no-untyped-def]
    # An independent check of the tensor table: its count over the whole checkpoint (TP1, vocab
    # unpadded, no vLLM-side buffers) is the sum of the safetensors the model ships.
    weights = shape_from_config(entry.config).weights
    assert weights is not None
    assert weights.checkpoint_bytes == pytest.approx(entry.index_total_bytes, rel=1e-6)


@pytest.mark.parametrize("entry", PINNED[:3], ids=lambda m: m.slug)
def test_exact_mode_splits_the_total_like_the_tensor_count(entry) -> None:  # type: ignore[no-untyped-def]
    index = {"metadata": {"total_size": entry.index_total_bytes}}
    estimated, exact = shape_from_config(entry.config), shape_from_config(entry.config, index)
    for tp in (1, 2, 8):
        a, b = weights_per_rank(estimated, tp), weights_per_rank(exact, tp)
        assert b.nbytes == pytest.approx(a.nbytes, rel=1e-5) and "total_size" in b.source

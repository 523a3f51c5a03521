"""The torch blocks the GPTQ/AWQ Marlin repack leaves cached (app.core.repack_cache): the allocator replay
against a hand trace of PyTorch's caching-allocator rules, and the non-torch row against a public log."""

from __future__ import annotations

from app.core.calibration import DEFAULT
from app.core.estimates import EstimateContext, non_torch_bytes, non_torch_cell
from app.core.model_config import shape_from_config
from app.core.repack_cache import CachingAllocator, MarlinLinear, repack_cached_bytes
from app.core.versions import rules_for
from app.ingest.catalogue import get_model

MIB = 1024**2
GIB = 1024**3
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


def test_a_split_block_stays_cached_by_hand() -> None:
    """Two channel-wise int4 layers (scales, zeros and g_idx under 1 MiB: the small pool). Hand trace:
    qweights of 40 and 32 MiB get their own segments; repacking the first takes a new 40 MiB segment and
    frees the old one; the second's 32 MiB repack best-fits into that free 40 MiB block, splitting off
    8 MiB (more than 1 MiB remains), and frees its own segment whole. empty_cache then releases the
    whole free segment, not the 8 MiB beside a live tensor."""
    layer = [MarlinLinear(8192, 10240, 4, -1), MarlinLinear(8192, 8192, 4, -1)]
    assert [dict(lin.construction())["qweight"] for lin in layer] == [40 * MIB, 32 * MIB]
    assert repack_cached_bytes([layer]) == 8 * MIB


def test_allocator_rules_by_hand() -> None:
    a = CachingAllocator()
    a.malloc("small", MIB)  # ≤ 1 MiB: the small pool, not replayed
    a.malloc("mid", 3 * MIB)  # 1–10 MiB: a 20 MiB segment, 17 MiB free beside it
    assert a.cached_in_used_segments() == 17 * MIB
    a.malloc("mid2", 3 * MIB + 1)  # rounded to 512 B, best fit in the same segment
    assert a.cached_in_used_segments() == 17 * MIB - (3 * MIB + 512)
    a.free("mid")
    a.free("mid2")  # merges with both neighbours: one free 20 MiB segment, released by empty_cache
    assert a.cached_in_used_segments() == 0
    a.malloc("big", 11 * MIB)  # ≥ 10 MiB: the free 20 MiB block fits it (best fit before a new segment)
    assert a.cached_in_used_segments() == 9 * MIB


def _ctx(version: str, tp: int = 1) -> EstimateContext:
    rules = rules_for(version)
    return EstimateContext(tp, 1, 4096, 256, True, rules, v1=rules.version >= (0, 8, 0))


def test_non_torch_against_issue_10360() -> None:
    """vLLM issue #10360 (comment of 2024-11-30): Qwen2.5-32B-Instruct-AWQ on an A6000 with v0.6.4.post1
    logs non_torch_memory=0.44GiB; the whole-device base is fitted on other logs (DEFAULT, 0.35 GiB),
    the repack replay adds 0.10 GiB: 0.45 GiB. Not fitted on. The checkpoint's quantization_config is taken
    as AutoAWQ's GEMM export (4 bits, group 128, zero points; `AWQ` above), not read from the repository."""
    shape = shape_from_config({**get_model("qwen2.5-32b").config, "quantization_config": AWQ})
    row = non_torch_bytes(shape, _ctx("0.6.4"))
    assert abs(row - 0.44 * GIB) < 0.02 * GIB
    assert 0.08 * GIB < row - DEFAULT.non_torch_whole < 0.12 * GIB
    assert "Marlin repack" in non_torch_cell(shape, _ctx("0.6.4")).note


def test_only_where_cached_blocks_count_and_only_for_gptq_awq() -> None:
    quantized = shape_from_config({**get_model("qwen2.5-32b").config, "quantization_config": AWQ})
    plain = shape_from_config(get_model("qwen2.5-32b").config)
    base = non_torch_bytes(plain, _ctx("0.6.4"))
    assert base == DEFAULT.non_torch_whole
    # from v0.6.5 (V0) the init snapshot and torch's reserved bytes keep cached blocks out of the row
    assert non_torch_bytes(quantized, _ctx("0.6.5")) == non_torch_bytes(plain, _ctx("0.6.5"))
    assert non_torch_bytes(quantized, _ctx("0.19.0")) == non_torch_bytes(plain, _ctx("0.19.0"))
    # V1 before v0.9.1 counts them too
    assert non_torch_bytes(quantized, _ctx("0.8.5")) > non_torch_bytes(plain, _ctx("0.8.5"))

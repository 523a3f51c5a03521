"""The CUDA-graph row (app.core.cudagraphs) against hand counts from vLLM's code and against the
logged graph pools; properties of the count."""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.calibration import DEFAULT
from app.core.cudagraphs import AttentionFacts, capture_sizes, graph_terms
from app.core.estimates import EstimateContext, cuda_graph_terms
from app.core.model_config import shape_from_config
from app.core.profile_run import forward_per_token
from app.core.versions import parse_version, rules_for
from app.ingest.catalogue import get_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

MIB = 1024**2
GIB = 1024**3
v = parse_version
SPLITTING_OPS = {"unified_attention_with_output", "gdn_attention", "mamba_mixer2"}


def pieces_by_split(ops: list[str]) -> int:
    """An independent count of `split_graph`'s non-splitting submodules (vllm/compilation/backends.py):
    a new piece starts after every splitting op; consecutive splitting ops stay together."""
    pieces, open_piece = 0, False
    for op in ops:
        if op in SPLITTING_OPS:
            open_piece = False
        elif not open_piece:
            pieces, open_piece = pieces + 1, True
    return pieces


def test_pieces_are_layers_plus_one() -> None:
    layer = ["rms_norm", "qkv_proj", "rotary", "unified_attention_with_output", "o_proj", "add_norm", "mlp"]
    for layers in (1, 28, 94):
        ops = ["embed"] + layer * layers + ["norm"]
        g = graph_terms(v("0.10.2"), True, "PIECEWISE", False, 256, 2048, layers, 0, DEFAULT)
        assert g.pieces == pieces_by_split(ops) == layers + 1


def test_v0102_piecewise_pool_by_hand() -> None:
    g = graph_terms(v("0.10.2"), True, "auto", False, 256, 2048, 94, 1000, DEFAULT)
    assert (g.mode, g.piecewise, g.full, g.cuda_graphs) == ("PIECEWISE", 67, 0, 67 * 95)
    assert g.total == 512 * 1000 + 67 * 95 * DEFAULT.graph_bytes


def test_full_graphs_are_one_graph_each_holding_every_layers_kernels() -> None:
    # v0.11.0 FULL_AND_PIECEWISE (file 18: "67/67 … PIECEWISE", "35/35 … FULL"): a FULL graph is one
    # CUDA graph of the whole forward, so it holds the kernels the layers + 1 pieces of a size split:
    # the driver memory is paid per size × (layers + 1) in both modes
    g = graph_terms(v("0.11.0"), True, "auto", False, 256, 2048, 48, 1000, DEFAULT)
    assert (g.piecewise, g.full, g.cuda_graphs, g.units) == (67, 35, 67 * 49 + 35, (67 + 35) * 49)
    assert g.total == 512 * 1000 + (67 + 35) * 49 * DEFAULT.graph_bytes
    v0 = graph_terms(v("0.6.4"), False, "auto", False, 256, 2048, 32, 1000, DEFAULT)
    assert (v0.mode, v0.cuda_graphs, v0.units) == ("FULL", 35, 35 * 33)
    moe = graph_terms(v("0.11.0"), True, "auto", False, 256, 2048, 48, 1000, DEFAULT, moe=True)
    assert moe.total == 512 * 1000 + (67 + 35) * 49 * DEFAULT.graph_bytes_moe


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["0.6.4", "0.7.3", "0.10.2", "0.11.0", "0.19.0", "0.21.0", "0.27.1"]), st.integers(1, 2048),
       st.integers(1, 16384), st.integers(8, 1024), st.integers(1, 1024), st.integers(0, 500_000), st.booleans(),
       st.booleans(), st.booleans())  # fmt: skip
def test_the_row_never_decreases_with_the_largest_capture_size(
    version: str, seqs: int, mnbt: int, size: int, extra: int, per_token: int, hopper: bool, moe: bool, inb: bool
) -> None:
    from app.core.cudagraphs import AttentionFacts

    att = AttentionFacts((9, 0) if hopper else (8, 0), "bfloat16", 128, 32)
    v1 = v(version) >= (0, 7, 0)
    rows = [graph_terms(v(version), v1, "auto", False, seqs, mnbt, 32, per_token, DEFAULT, top, att, inb, moe).total
            for top in (size, size + extra)]  # fmt: skip
    assert rows[1] >= rows[0]


def test_v021_estimate_by_hand() -> None:
    # profile_cudagraph_memory (vllm/v1/worker/gpu_model_runner.py @4dd49b06f): per mode the two largest
    # sizes; first = pool + sample (+ the workspaces on the first capture of all); total = max(first) +
    # Σ max(sample, 1 MiB) × (n − 1); the sample is (layers + 1) × graph_sample_bytes for both modes
    fwd = 1000
    g = graph_terms(v("0.27.1"), True, "auto", False, 1024, 8192, 80, fwd, DEFAULT)
    sizes = capture_sizes(v("0.27.1"), True, 1024, 8192)
    assert len(sizes) == 51 and g.piecewise == g.full == 51
    per = 81 * DEFAULT.graph_sample_bytes
    first_pw = 512 * fwd + DEFAULT.graph_workspace + per
    first_full = 0 + per  # the FULL captures reuse the piecewise pool (same largest size, no FA3 facts)
    assert g.total == max(first_pw, first_full) + per * 50 + per * 50
    assert "inside the KV budget" in g.note


def test_estimate_sample_floor_moe_and_full_only() -> None:
    from app.core.calibration import Calibration

    # "Use at least 1 MiB per graph for driver overhead": a zero sample still costs 1 MiB a size
    zero = replace(DEFAULT, graph_sample_bytes=0, graph_workspace=0)
    assert isinstance(zero, Calibration)
    g = graph_terms(v("0.27.1"), True, "PIECEWISE", False, 1024, 8192, 10, 1000, zero)
    assert g.total == 512 * 1000 + MIB + 50 * MIB
    # mixture-of-experts layers take their own fitted sample
    moe = graph_terms(v("0.27.1"), True, "PIECEWISE", False, 1024, 8192, 24, 1000, DEFAULT, moe=True)
    assert moe.total == 512 * 1000 + DEFAULT.graph_workspace + 51 * 25 * DEFAULT.graph_sample_bytes_moe
    # FULL only: the first capture of all is the FULL one, and it carries the workspaces and the whole pool
    full = graph_terms(v("0.27.1"), True, "FULL", False, 1024, 8192, 24, 1000, DEFAULT)
    per = 25 * DEFAULT.graph_sample_bytes
    assert (full.piecewise, full.full) == (0, 51)
    assert full.total == 512 * 1000 + DEFAULT.graph_workspace + per + 50 * per


def test_chunked_local_attention_captures_piecewise_only() -> None:
    """Llama-4's chunked local attention has no FULL graphs (PR #26034): log 36 (v0.19.0, Scout TP4)
    prints "Profiling CUDA graph memory: PIECEWISE=51 (largest=512)" and no FULL line."""
    logs = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
    log = (logs / "36-v0190-llama4-scout-h100-tp4.log").read_text()
    assert "PIECEWISE=51 (largest=512)\n" in log and "FULL=" not in log.split("Profiling CUDA graph memory")[1][:60]
    s = shape_from_config(get_model("llama-4-scout-17b-16e").config)
    ctx = EstimateContext(4, 1, 8192, 1024, False, rules_for("0.19.0"))
    g = cuda_graph_terms(s, ctx)
    assert (g.mode, g.piecewise, g.full) == ("PIECEWISE", 51, 0)
    dense = shape_from_config(get_model("llama-3.1-8b").config)
    assert cuda_graph_terms(dense, ctx).mode == "FULL_AND_PIECEWISE"
    # before the fix (v0.11.0) the default mode stands; an explicit mode is the user's
    assert graph_terms(v("0.11.0"), True, "auto", False, 256, 2048, 48, 1, DEFAULT, chunked_attention=True).full
    assert graph_terms(v("0.19.0"), True, "FULL", False, 256, 2048, 48, 1, DEFAULT, chunked_attention=True).full


def test_llama70b_tp4_v0271_graph_row() -> None:
    s = shape_from_config(get_model("llama-3.1-70b").config)
    ctx = EstimateContext(4, 1, 8192, 1024, False, rules_for("0.27.1"))
    g = cuda_graph_terms(s, ctx)
    sharded, unsharded = forward_per_token(s, 4)
    assert g.pool_bytes == 512 * (sharded + unsharded)
    assert g.cuda_graphs == 51 * 81 + 51
    # the per-layer charge of every FULL graph made this 4.46 GiB; one graph each it is about 3 GiB
    assert g.total < 3.2 * GIB
    assert cuda_graph_terms(s, replace(ctx, enforce_eager=True)).total == 0


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["0.7.3", "0.10.2", "0.11.0", "0.21.0", "0.27.1"]), st.integers(1, 1024),
       st.integers(1, 120), st.sampled_from([512, 2048, 8192]))  # fmt: skip
def test_more_sequences_or_layers_never_fewer_graphs(version: str, seqs: int, layers: int, mnbt: int) -> None:
    a = graph_terms(v(version), True, "auto", False, seqs, mnbt, layers, 1000, DEFAULT)
    more_seqs = graph_terms(v(version), True, "auto", False, seqs + 1, mnbt, layers, 1000, DEFAULT)
    more_layers = graph_terms(v(version), True, "auto", False, seqs, mnbt, layers + 1, 1000, DEFAULT)
    assert more_seqs.cuda_graphs >= a.cuda_graphs and more_layers.cuda_graphs >= a.cuda_graphs
    assert more_seqs.total >= a.total and more_layers.total >= a.total


def test_logged_pools_leave_one_out() -> None:
    """Every logged pool of a known model, predicted with the constant fitted without it."""
    from bench_estimates_loo import graph_lines

    scored = [r for r in graph_lines() if r["loo_gib"] is not None]
    assert len(scored) >= 4
    errors = {str(r["log"]): float(r["loo_gib"]) / float(r["logged_gib"]) - 1 for r in scored}  # type: ignore[arg-type]
    assert statistics.median(abs(e) for e in errors.values()) < 0.10  # 8.0 % over the 24 logged pools
    for log, err in errors.items():
        if log in GRAPH_MISSES:  # one constant a unit cannot hold these (bench/RESULTS-estimates.md)
            assert abs(err) >= 0.40, (log, err)  # still a miss: when the model catches it, move it out
        else:
            assert abs(err) < 0.30, (log, err)


# Logged pools the per-unit constants miss by more than 40 % (leave-one-out), and why they are not
# modelled: driver memory per captured kernel is not one constant across versions and cards.
GRAPH_MISSES = {
    "15-v0102-qwen3-next-80b-h200-tp2-hybrid.log": "v0.10.2 hybrid (Gated DeltaNet + MoE): 0.73 MiB a unit",
    "42-v0191-qwen3-8b-a100-40gb-tp1.log": "the A100 (FlashAttention 2) log: 0.77 MiB a unit",
    "public/40-v073-llama31-8b-int8-v1-tp1-graph-capture.log": "v0.7.3 V1: 0.91 MiB a unit",
}


def test_stated_per_graph_range_is_the_observed_one() -> None:
    from bench_estimates_loo import all_observations

    from app.core.cudagraphs import GRAPH_BYTES_RANGE_MIB

    per_unit = [o.value / MIB for o in all_observations() if o.kind in ("graph", "graph_moe")]
    assert (round(min(per_unit), 2), round(max(per_unit), 2)) == GRAPH_BYTES_RANGE_MIB
    for fitted in (DEFAULT.graph_bytes, DEFAULT.graph_bytes_moe):
        assert GRAPH_BYTES_RANGE_MIB[0] <= fitted / MIB <= GRAPH_BYTES_RANGE_MIB[1]


# v0.19 H100 logs' DEBUG lines (`profile_cudagraph_memory`): FULL captures after PIECEWISE into the
# same pool, so their first capture is the FA3 accumulators plus one FULL graph's driver memory
# (the logged per-graph figure): (model, TP, logged FULL first-capture MiB, logged FULL per-graph MiB).
FULL_FIRST_CAPTURES = (
    ("llama-3.1-8b", 1, 260, 6),  # file 29
    ("Qwen2.5-7B-Instruct", 1, 228, 4),  # file 33
    ("gemma-2-9b-it", 1, 262, 6),  # file 26
    ("gemma-2-27b-it", 1, 262, 8),  # file 25
    ("gemma-3-12b-it", 1, 4, 8),  # file 27: mm-prefix model, not FA3
    ("gemma-3-27b-it", 1, 8, 6),  # file 28
    ("gpt-oss-20b", 1, 6, 8),  # file 38
    ("gpt-oss-20b", 2, 8, 6),  # file 35
)


def test_fa3_accumulators_against_the_logged_full_first_capture() -> None:
    """Independent count: 32 splits × heads/TP × 512 tokens × (head_dim + 1) × 4 bytes, within the
    2 MiB granularity of the logged figures plus one graph."""
    from app.core.cudagraphs import AttentionFacts, fa3_split_accum_bytes

    for model, tp, first, per_graph in FULL_FIRST_CAPTURES:
        shape = shape_from_config(get_model(model).config)
        accum = fa3_split_accum_bytes(
            AttentionFacts((9, 0), shape.dtype, shape.head_dim, shape.num_attention_heads // tp, shape.model_type,
                           shape.architecture, shape.mla_latent_dim is not None), v("0.19.0"), True, 512)  # fmt: skip
        if first > 16:
            hand = 32 * (shape.num_attention_heads // tp) * 512 * (shape.head_dim + 1) * 4
            assert accum == hand
        assert abs(accum / MIB + per_graph - first) <= 4, (model, tp, accum / MIB, first)


def test_fa3_accumulators_only_on_hopper_with_full_graphs() -> None:
    from app.core.cudagraphs import AttentionFacts, fa3_split_accum_bytes

    facts = AttentionFacts((9, 0), "bfloat16", 128, 32)
    assert fa3_split_accum_bytes(facts, v("0.19.0"), True, 512) == 32 * 32 * 512 * 129 * 4
    for other in (replace(facts, capability=(8, 0)), replace(facts, capability=None), replace(facts, dtype="float32"),
                  replace(facts, head_dim=512), replace(facts, mla=True)):  # fmt: skip
        assert fa3_split_accum_bytes(other, v("0.19.0"), True, 512) == 0
    assert fa3_split_accum_bytes(facts, v("0.9.2"), True, 512) == 0  # before PR #20301
    assert fa3_split_accum_bytes(facts, v("0.19.0"), True, 0) == 0  # no FULL graphs
    pw = graph_terms(v("0.19.0"), True, "PIECEWISE", False, 256, 8192, 32, 1000, DEFAULT, attention=facts)
    assert pw.pool_bytes == 512 * 1000  # PIECEWISE only: the attention runs outside the graphs
    both = graph_terms(v("0.19.0"), True, "auto", False, 256, 8192, 32, 1000, DEFAULT, attention=facts)
    assert both.pool_bytes == 512 * 1000 + 32 * 32 * 256 * 129 * 4  # largest FULL size: 256 sequences


def test_the_estimate_says_where_its_driver_terms_do_not_carry_over() -> None:
    """The fitted terms are H100 ones; log 42 (A100, v0.19.1, Qwen3-8B) logs an estimate of 2.35 GiB, 3.5× the
    rule's 0.68: off Hopper (or on an unknown card) the note says the row is not predictable from the config."""
    from app.core.cudagraphs import AttentionFacts

    def note(capability: tuple[int, int] | None) -> str:
        facts = AttentionFacts(capability, "bfloat16", 128, 32)
        return graph_terms(v("0.21.0"), True, "auto", False, 256, 2048, 36, 1000, DEFAULT, attention=facts).note

    assert "not predictable from the config" in note((8, 0)) and "not predictable" in note(None)
    assert "not predictable" not in note((9, 0))
    # outside the budget (before v0.21) the note is the capture row's
    outside = graph_terms(v("0.20.0"), True, "auto", False, 256, 2048, 36, 1000, DEFAULT)
    assert "not predictable" not in outside.note


def test_gpt_oss_captured_pool_against_the_oom_lines() -> None:
    """Logs 38 / 53 (gpt-oss-20b, v0.19, H100, TP1 / TP2) end in an OOM whose "allocated in private pools (e.g.,
    CUDA Graphs)" is the graph pool's free cached blocks (PyTorch's CUDACachingAllocator sums the pool's
    `blocks`, its free list): 626 / 318 MiB, what the captures' tensors left. By hand: FA3's fp32 split
    accumulators at the largest FULL size, 32 splits × 64/TP heads × 1,024 tokens × (64 + 1) × 4 B (520 / 260
    MiB), plus the largest size's forward tensors; before stop 29 gpt-oss took no accumulator (35 / 32 MiB)."""
    shape = shape_from_config(get_model("gpt-oss-20b").config)
    for tp, logged_mib in ((1, 626), (2, 318)):
        facts = AttentionFacts((9, 0), shape.dtype, shape.head_dim, shape.num_attention_heads // tp, shape.model_type,
                               shape.architecture, False)  # fmt: skip
        hand = 32 * (64 // tp) * 1024 * (64 + 1) * 4
        sharded, unsharded = forward_per_token(shape, tp)
        captured = graph_terms(v("0.19.0"), True, "auto", False, 1024, 8192, 24, sharded + unsharded, DEFAULT,
                               max_size=1024, attention=facts, moe=True)  # fmt: skip
        assert captured.pool_bytes == 1024 * (sharded + unsharded) + hand
        assert abs(captured.pool_bytes / MIB / logged_mib - 1) < 0.15, (tp, captured.pool_bytes / MIB)
        # vLLM's own estimate (profile_cudagraph_memory) logs no accumulator for gpt-oss: kept out there
        profiled = graph_terms(v("0.19.0"), True, "auto", False, 1024, 8192, 24, sharded + unsharded, DEFAULT,
                               max_size=1024, attention=facts, in_budget=True, moe=True)  # fmt: skip
        assert profiled.pool_bytes == 1024 * (sharded + unsharded)

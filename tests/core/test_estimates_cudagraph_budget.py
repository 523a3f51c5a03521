"""VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS as a plan input (`engine.estimate_cudagraphs`, issue 10
item 4): from v0.18 the variable puts vLLM's CUDA-graph estimate inside the KV budget
(`Worker.determine_available_memory`, vllm/v1/worker/gpu_worker.py @4dd49b06f); on by default from v0.21."""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import pytest

from app.core.calibration import DEFAULT
from app.core.errors import InputError
from app.core.estimates import cuda_graph_terms
from app.core.plan import PlanInput, compute, plan_estimate_context
from app.core.profile_run import forward_per_token
from app.core.versions import rules_for, with_cudagraph_estimate
from app.services import plan_inputs

GIB = 1024**3
MIB = 1024**2
LOG_29 = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "29-v0190-llama31-8b-h100-tp1-mml16k.log"
# log 29's run: Llama-3.1-8B-Instruct on one H100, v0.19.0, its non-default args
DOC = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "layout": {"tp": 1},
       "engine": {"max_model_len": 16384, "gpu_memory_utilization": 0.95, "enable_prefix_caching": False},
       "vllm_version": "0.19.0"}  # fmt: skip


def _plan(estimate: bool | None, version: str = "0.19.0", mode: str = "auto") -> PlanInput:
    engine: dict[str, object] = {**DOC["engine"], "cudagraph_mode": mode}  # type: ignore[dict-item]
    if estimate is not None:
        engine["estimate_cudagraphs"] = estimate
    return plan_inputs.plan_input({**DOC, "vllm_version": version, "engine": engine})


def test_the_version_default_is_off_before_021_and_on_after() -> None:
    assert not with_cudagraph_estimate(rules_for("0.19.0"), None).cuda_graphs_in_budget
    assert with_cudagraph_estimate(rules_for("0.21.0"), None).cuda_graphs_in_budget
    assert not with_cudagraph_estimate(rules_for("0.21.0"), False).cuda_graphs_in_budget
    assert with_cudagraph_estimate(rules_for("0.18.0"), True).cuda_graphs_in_budget
    # the default utilization stays the version's (0.92 from v0.21 whatever the variable, PR #38284)
    assert with_cudagraph_estimate(rules_for("0.21.0"), False).default_gpu_memory_utilization == 0.92


def test_setting_it_moves_the_graph_row_into_the_budget() -> None:
    off, on = compute(_plan(None)), compute(_plan(True))
    assert (off.rules.cuda_graphs_in_budget, on.rules.cuda_graphs_in_budget) == (False, True)
    graphs_on = on.ledgers[0].inp.cuda_graphs
    assert graphs_on is not None
    # the KV budget loses exactly the estimated row (nothing else depends on the variable)
    assert off.ledgers[0].kv.bytes - on.ledgers[0].kv.bytes == graphs_on.bytes
    assert "inside the KV budget" in graphs_on.note


def test_the_in_budget_row_is_profile_cudagraph_memory_by_hand() -> None:
    """max(first over modes) + Σ max(per_graph, 1 MiB) × (n − 1) (`profile_cudagraph_memory`,
    vllm/v1/worker/gpu_model_runner.py @4dd49b06f), from Llama-3.1-8B's numbers on an H100."""
    plan = _plan(True)
    shape = plan.model.shape
    assert shape is not None
    g = cuda_graph_terms(shape, plan_estimate_context(plan))
    assert (g.piecewise, g.full) == (51, 51)  # 1024 sequences, 8192 batched tokens: sizes 1 … 512
    sharded, unsharded = forward_per_token(shape, 1)
    pool_pw = 512 * (sharded + unsharded)  # the largest piecewise capture's tensors
    accum = 32 * 32 * 512 * (128 + 1) * 4  # FA3: 32 splits × 32 heads × 512 tokens × (head_dim + lse) fp32
    per = 33 * DEFAULT.graph_sample_bytes  # 32 layers + 1, the same for a FULL size
    first = max(pool_pw + DEFAULT.graph_workspace + per, accum + per)
    assert g.total == first + per * 50 + per * 50
    # log 29's DEBUG lines: PIECEWISE 138 MiB first + 50 × 6; FULL 260 MiB first + 50 × 6
    assert abs(first / MIB - 260) <= 4 and abs(per / MIB - 6) <= 1


def test_the_in_budget_row_against_vllms_logged_estimate() -> None:
    """Log 29 (v0.19.0, the variable unset) still logs vLLM's own estimate: 0.84 GiB. The row the
    plan would subtract with the variable set is within 5 % of it (measured: +0.4 % with the in-sample
    constants, −1.3 % leave-one-out; bench/RESULTS-estimates.md)."""
    logged = float(re.findall(r"Estimated CUDA graph memory: ([0-9.]+) GiB total", LOG_29.read_text())[0])
    on = compute(_plan(True)).ledgers[0].inp.cuda_graphs
    assert on is not None
    assert on.bytes / GIB == pytest.approx(logged, rel=0.05)


def test_the_result_echoes_the_setting() -> None:
    from app.services.plans import run_plan

    out = run_plan({**DOC, "engine": {**DOC["engine"], "estimate_cudagraphs": True}}, with_levers=False)  # type: ignore[dict-item]
    assert out["cuda_graphs_in_budget"] is True
    assert out["engine"]["estimate_cudagraphs"] is True and out["engine"]["cudagraph_mode"] == "auto"
    assert run_plan(DOC, with_levers=False)["engine"]["estimate_cudagraphs"] is None


def test_the_variable_does_not_exist_before_018() -> None:
    with pytest.raises(InputError) as err:
        _plan(True, "0.10.2")
    assert err.value.field == "engine.estimate_cudagraphs"
    assert "0.18" in err.value.message
    assert not compute(_plan(False, "0.10.2")).rules.cuda_graphs_in_budget


def test_the_documents_cudagraph_mode_reaches_the_estimate() -> None:
    """engine.cudagraph_mode was validated but dropped before the Engine was built (always "auto")."""
    assert _plan(None, mode="PIECEWISE").engine.cudagraph_mode == "PIECEWISE"
    auto = compute(_plan(None)).ledgers[0].inp.cuda_graphs
    piecewise = compute(_plan(None, mode="PIECEWISE")).ledgers[0].inp.cuda_graphs
    none = compute(_plan(None, mode="NONE")).ledgers[0].inp.cuda_graphs
    assert auto is not None and piecewise is not None and none is not None
    assert none.bytes == 0 < piecewise.bytes < auto.bytes


# bench/RESULTS-estimates.md: 19 v0.19 logs print vLLM's estimate (not applied); the in-budget row is off by
# 7.1 % at the median leave-one-out and in-sample (worst −71.1 %, the A100 Qwen3-8B run, whose per-size
# samples no DEBUG line states). The threshold sits about three points above it.
IN_BUDGET_MEDIAN_THRESHOLD = 0.10


def test_in_budget_rows_against_every_logged_estimate() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from estimate_graph_budget import estimate_lines

    rows = estimate_lines()
    assert len(rows) >= 19
    for key in ("err", "in_err"):
        errs = [abs(float(r[key])) for r in rows]  # type: ignore[arg-type]
        assert statistics.median(errs) <= IN_BUDGET_MEDIAN_THRESHOLD, rows


def test_plans_from_021_and_the_current_version_apply_it_by_default() -> None:
    """PR #38284 (`96a85c575`, 2026-04-21) made VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 the default;
    vLLM's own advice names v0.21 (`ab5666eb7`). A plan naming 0.21.0, a later one, or none (the current
    release) subtracts the row unasked and says why; 0.20 does not."""
    from app.core.versions import CURRENT_VLLM, parse_version

    assert parse_version(CURRENT_VLLM) >= (0, 21, 0)
    current = plan_inputs.plan_input({k: v for k, v in DOC.items() if k != "vllm_version"})
    for plan in (_plan(None, "0.21.0"), _plan(None, "0.24.0"), current):
        out = compute(plan)
        graphs = out.ledgers[0].inp.cuda_graphs
        assert out.rules.cuda_graphs_in_budget and graphs is not None
        assert "on by default since v0.21.0" in graphs.note
    old = compute(_plan(None, "0.20.0"))
    assert not old.rules.cuda_graphs_in_budget
    assert old.ledgers[0].inp.cuda_graphs is not None and "outside the budget" in old.ledgers[0].inp.cuda_graphs.note
    opted = compute(_plan(True, "0.20.0")).ledgers[0].inp.cuda_graphs
    assert opted is not None and "=1 set" in opted.note

"""The CUDA-graph row as it meets the KV budget with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS set
(`engine.estimate_cudagraphs`; the default from v0.21, PR #38284 `96a85c575`), against the estimate
vLLM itself logs.

From PR #30515 (v0.18) `Worker.determine_available_memory` (vllm/v1/worker/gpu_worker.py @4dd49b06f)
runs `profile_cudagraph_memory` whether or not the variable is set and logs "Estimated CUDA graph
memory: X GiB total"; the v0.19 runs in tests/data/vllm-logs left it unset, so their KV was sized
without it, but the logged X is what a v0.21 run (or a v0.19 run with the variable set) subtracts.
Two terms of that estimate are not fixed by vLLM's code (app.core.cudagraphs `vllm_estimate`): the
per-size sample's driver memory per layer and the first capture's kernel workspaces. They are fitted
on the same logs' DEBUG lines ("Estimated {MODE} CUDA graph memory: F MiB first-capture + (n-1) × P MiB
per-graph") and scored leave-one-out: each log's row uses the constants fitted without that log."""

from __future__ import annotations

import statistics
from dataclasses import replace

from bench_estimates_loo import GIB, JSON, _first, _run, _shape, calibration_without, context
from estimate_cases import CASES, Case

from app.core.calibration import DEFAULT, Calibration, Observation
from app.core.estimates import cuda_graph_terms
from app.core.kvspec import pp_layer_split
from app.core.versions import with_cudagraph_estimate


def _in_budget_terms(case: Case, cal: Calibration):  # type: ignore[no-untyped-def]
    shape, _ = _shape(case.model)
    ctx, _ = context(case, cal)
    ctx = replace(ctx, rules=with_cudagraph_estimate(ctx.rules, True))
    return shape, cuda_graph_terms(shape, ctx)


def sample_observations(case: Case) -> list[Observation]:
    """What one log's DEBUG lines say of the two fitted terms (app.core.calibration): per mode,
    `P / (layers + 1)`, and for the first capture of all (PIECEWISE) `F − pool − P`."""
    ranks = _run(case.log, case.run)["ranks"]
    if case.enforce_eager or _first(ranks, "cuda_graph_estimate_bytes") is None:  # type: ignore[arg-type]
        return []
    shape, terms = _in_budget_terms(case, DEFAULT)
    pieces = max(pp_layer_split(shape.num_layers, case.pp)) + 1
    out = []
    for mode in ("piecewise", "full"):
        per = _first(ranks, f"cuda_graph_estimate_{mode}_per_graph_bytes")  # type: ignore[arg-type]
        if per is not None:
            kind = "graph_sample_moe" if (shape.num_experts or 0) > 1 else "graph_sample"
            out.append(Observation(kind, per // pieces, case.log))
    first = _first(ranks, "cuda_graph_estimate_piecewise_first_bytes")  # type: ignore[arg-type]
    per = _first(ranks, "cuda_graph_estimate_piecewise_per_graph_bytes")  # type: ignore[arg-type]
    if first is not None and per is not None and terms.piecewise:
        out.append(Observation("graph_workspace", max(0, first - terms.piecewise_pool - per), case.log))
    return out


def estimate_lines() -> list[JSON]:
    """One row per scored case whose log states vLLM's estimate: logged, in-budget row (LOO and in-sample)."""
    out: list[JSON] = []
    in_sample = calibration_without(None)
    for case in CASES:
        logged = _first(_run(case.log, case.run)["ranks"], "cuda_graph_estimate_bytes")  # type: ignore[arg-type]
        if logged is None or case.enforce_eager:
            continue
        row = _in_budget_terms(case, calibration_without(case.log))[1].total
        row_in = _in_budget_terms(case, in_sample)[1].total
        out.append({"log": case.log, "model": case.model, "tp": case.tp, "logged_gib": logged / GIB,
                    "row_gib": row / GIB, "err": (row - logged) / logged,
                    "in_gib": row_in / GIB, "in_err": (row_in - logged) / logged})  # fmt: skip
    return out


def print_estimate_table() -> None:
    rows = estimate_lines()
    print("| log | model | TP | vLLM's logged estimate GiB | in-budget row GiB (LOO) | error | in-sample GiB | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['log']} | {r['model']} | {r['tp']} | {float(r['logged_gib']):.2f} | "  # type: ignore[arg-type]
              f"{float(r['row_gib']):.2f} | {float(r['err']):+.1%} | "  # type: ignore[arg-type]
              f"{float(r['in_gib']):.2f} | {float(r['in_err']):+.1%} |")  # type: ignore[arg-type]  # fmt: skip
    for key, what in (("err", "leave-one-out"), ("in_err", "in-sample")):
        errs = [abs(float(r[key])) for r in rows]  # type: ignore[arg-type]
        if errs:
            print(f"\n{len(errs)} logs, {what}: median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}.")

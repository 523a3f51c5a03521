"""The CUDA-graph row as it meets the KV budget with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS set
(`engine.estimate_cudagraphs`; the default from v0.21), against the estimate vLLM itself logs.

From PR #30515 (v0.18) `Worker.determine_available_memory` (vllm/v1/worker/gpu_worker.py @4dd49b06f)
runs `profile_cudagraph_memory` whether or not the variable is set and logs "Estimated CUDA graph
memory: X GiB total"; the v0.19 runs in tests/data/vllm-logs left it unset, so their KV was sized
without it, but the logged X is what a v0.21 run (or a v0.19 run with the variable set) subtracts.
That makes every such log an independent check of the in-budget row; nothing is fitted on it."""

from __future__ import annotations

import statistics
from dataclasses import replace

from bench_estimates_loo import GIB, JSON, _first, _run, _shape, calibration_without, context
from estimate_cases import CASES

from app.core.estimates import cuda_graph_terms
from app.core.versions import with_cudagraph_estimate


def estimate_lines() -> list[JSON]:
    """One row per scored case whose log states vLLM's estimate: logged, in-budget row (LOO constants)."""
    out: list[JSON] = []
    for case in CASES:
        logged = _first(_run(case.log, case.run)["ranks"], "cuda_graph_estimate_bytes")  # type: ignore[arg-type]
        if logged is None or case.enforce_eager:
            continue
        shape, _ = _shape(case.model)
        ctx, _ = context(case, calibration_without(case.log))
        ctx = replace(ctx, rules=with_cudagraph_estimate(ctx.rules, True))
        row = cuda_graph_terms(shape, ctx).total
        out.append({"log": case.log, "model": case.model, "tp": case.tp, "logged_gib": logged / GIB,
                    "row_gib": row / GIB, "err": (row - logged) / logged})  # fmt: skip
    return out


def print_estimate_table() -> None:
    rows = estimate_lines()
    print("| log | model | TP | vLLM's logged estimate GiB | in-budget row GiB (LOO) | error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['log']} | {r['model']} | {r['tp']} | {float(r['logged_gib']):.2f} | "  # type: ignore[arg-type]
              f"{float(r['row_gib']):.2f} | {float(r['err']):+.1%} |")  # type: ignore[arg-type]  # fmt: skip
    errs = [abs(float(r["err"])) for r in rows]  # type: ignore[arg-type]
    if errs:
        print(f"\n{len(errs)} logs: median |error| {statistics.median(errs):.1%}, worst {max(errs):.1%}.")

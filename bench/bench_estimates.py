"""How close are the estimated ledger rows to real vLLM runs?

For every real startup log in tests/data/vllm-logs whose model is in the catalogue, plan the
same deployment from the model, the GPU's memory size and the layout alone (every row
estimated), and compare the estimated per-GPU KV memory with the "Available KV cache memory"
vLLM logged (the minimum over the ranks shown). Run: .venv/bin/python bench/bench_estimates.py
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from app.services.plans import import_log, run_plan

GIB = 2**30
LOGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm-logs"


@dataclass(frozen=True)
class Case:
    """A logged run and the settings it ran with (from the log, its index entry or vLLM's defaults)."""

    log: str
    run: int
    model: str
    gpu_total_gib: float
    util: float
    version: str
    tp: int
    max_model_len: int
    max_num_batched_tokens: int | None = None  # None: vLLM's default for the version and GPU


CASES = (
    # V0 without chunked prefill: max_num_batched_tokens = max(max_model_len, 2048)
    Case("01-v064-llama31-8b-rtx3090-tp1.log", 0, "Llama-3.1-8B", 23.58, 0.9, "0.6.4", 1, 20000, 20000),
    Case("01-v064-llama31-8b-rtx3090-tp1.log", 1, "Llama-3.1-8B", 23.58, 0.9, "0.6.4", 1, 29000, 29000),
    Case("13-v0102-qwen3-30b-a3b-fp8-2xl40s-tp2-ep.log", 0, "Qwen3-30B-A3B-FP8", 44.42, 0.95, "0.10.2", 2, 32768),
    Case("14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log", 0, "Qwen3-235B-A22B-FP8", 44.42, 0.9, "0.10.2", 8, 32768),
    Case("15-v0102-qwen3-next-80b-h200-tp2-hybrid.log", 0, "Qwen3-Next-80B-A3B", 139.81, 0.9, "0.10.2", 2, 262144),
    Case("18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log", 0, "qwen3-vl-30b-a3b-instruct", 23.58, 0.9, "0.11.0", 4, 65536),
)


def logged_kv(case: Case) -> int:
    parsed = import_log((LOGS / case.log).read_text(encoding="utf-8"))
    kvs = [int(r["kv_bytes"]) for r in parsed["runs"][case.run]["ranks"] if r.get("kv_bytes")]
    return min(kvs)


def estimated_kv(case: Case) -> int:
    engine: dict[str, object] = {"gpu_memory_utilization": case.util, "max_model_len": case.max_model_len}
    if case.max_num_batched_tokens:
        engine["max_num_batched_tokens"] = case.max_num_batched_tokens
    doc = {
        "model": {"catalogue": case.model},
        "layout": {"tp": case.tp},
        "gpu": {"total": f"{case.gpu_total_gib} GiB"},
        "engine": engine,
        "vllm_version": case.version,
    }
    result = run_plan(doc, with_levers=False)
    return min(int(r["kv_bytes"]) for r in result["ranks"])


def errors() -> list[tuple[Case, int, int, float]]:
    out = []
    for case in CASES:
        real, est = logged_kv(case), estimated_kv(case)
        out.append((case, real, est, (est - real) / real))
    return out


def main() -> None:
    rows = errors()
    print("| log | model | TP | logged KV GiB | estimated KV GiB | error |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case, real, est, err in rows:
        cells = (
            f"{case.log} run {case.run}",
            case.model,
            case.tp,
            f"{real / GIB:.2f}",
            f"{est / GIB:.2f}",
            f"{err:+.1%}",
        )
        print("| " + " | ".join(str(c) for c in cells) + " |")
    abs_errors = [abs(e) for *_, e in rows]
    print()
    median, worst = statistics.median(abs_errors), max(abs_errors)
    print(f"Median absolute error {median:.1%}, worst {worst:.1%} over {len(rows)} runs.")
    print(
        "The estimates were calibrated on these same runs (few public logs state every row), so this is a "
        "fit, not a held-out validation. The worst case is the multimodal model: vLLM's vision-encoder "
        "profiling is not modelled (the plan warns about it)."
    )


if __name__ == "__main__":
    main()

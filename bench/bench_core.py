"""Capacity-engine benchmarks: a 1,024-rank plan (128 nodes × 8 GPUs, every rank distinct) and a kv-bytes call.

Run: .venv/bin/python bench/bench_core.py   (prints a Markdown block; bench/run.sh records it)
Targets (issue 2): the plan under 5 ms, kv-bytes under 1 ms. Timings are the median of many
repetitions taken in one process, so a noisy shared machine moves them less.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench_plans import base_document
from timing import median_p90

from app.core.plan import compute
from app.core.report import result_to_dict
from app.schemas import validate_plan
from app.services.model_input import kv_bytes_report
from app.services.plan_inputs import build_plan
from app.services.plans import run_plan

GIB = 2**30
ROOT = Path(__file__).resolve().parents[1]


def measured_1024() -> dict[str, Any]:
    """1,024 DISTINCT measured ranks (bench_plans.distinct_ranks: every row varies by rank)."""
    return base_document(1024)


def main() -> None:
    doc = measured_1024()
    plan = build_plan(validate_plan(doc))
    compute_ms = median_p90(lambda: compute(plan), 200)
    result = compute(plan)
    json_ms = median_p90(lambda: result_to_dict(result), 100)
    full_ms = median_p90(lambda: run_plan(doc), 20)
    config = json.loads((ROOT / "tests" / "data" / "configs" / "qwen3-235b-a22b-fp8.json").read_text())
    kv_ms = median_p90(lambda: kv_bytes_report(config, tp=8, max_model_len=32768), 2000)
    rows = [
        ("1,024-rank plan: compute (core)", compute_ms, "< 5 ms"),
        ("1,024-rank plan: JSON result", json_ms, ""),
        ("1,024-rank plan: validate + compute + levers + JSON", full_ms, ""),
        ("kv-bytes (config → shape → per-rank KV → worst case)", kv_ms, "< 1 ms"),
    ]
    print("| benchmark | median ms | p90 ms | target |")
    print("| --- | --- | --- | --- |")
    for name, (median, p90), target in rows:
        print(f"| {name} | {median:.3f} | {p90:.3f} | {target} |")


if __name__ == "__main__":
    main()

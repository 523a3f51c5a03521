"""Benchmark the concurrency-cliff simulator on seed 002's workload.

    .venv/bin/python bench/bench_sim.py            # timings (best of --repeat) and memory,
                                                   # printed as a Markdown block
    taskset -c 0 .venv/bin/python bench/bench_sim.py   # pinned to one core

Main ramp: 10 levels × 2,000 requests, seed 002's prompt mix (lognormal 6.6/0.9 clipped
64…8,192), 70 % sharing a 512-token prefix, on seed 002's 24 GB card (1,783 blocks of 16).
The issue's budget (< 1 s, < 200 MB) is for the main ramp; the full run adds the same ramp
without a shared prefix.
"""

from __future__ import annotations

import argparse
import platform
import random
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.core.sim.ramp import SimConfig, run_levels, simulate
from app.core.sim.workload import Workload, make_requests

RAMP = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)


def config(blocks: int) -> SimConfig:
    workload = Workload(shared_prefix_tokens=512, shared_fraction=0.7)
    return SimConfig(blocks=blocks, workload=workload, requests_per_level=2000, ramp=RAMP)


def best_of(repeat: int, fn: Callable[[], object]) -> tuple[float, float]:
    """Best wall-clock and best CPU seconds over ``repeat`` runs."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=1783)
    args = parser.parse_args()
    cfg = config(args.blocks)

    def main_ramp() -> object:
        requests = make_requests(cfg.workload, cfg.requests_per_level, random.Random(2))
        return run_levels(cfg, requests)

    def full() -> object:
        return simulate(cfg, random.Random(2))

    t_main = best_of(args.repeat, main_ramp)
    t_full = best_of(args.repeat, full)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    result = simulate(cfg, random.Random(2))
    traced_mib = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    print("```")  # a Markdown block: bench/run.sh records the output as is
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(f"pool {cfg.blocks} blocks × {cfg.block_size}, {cfg.requests_per_level} requests × {len(RAMP)} levels")
    print(f"main ramp:           {t_main[0]:.3f} s wall, {t_main[1]:.3f} s CPU (best of {args.repeat})")
    print(f"with without_prefix: {t_full[0]:.3f} s wall, {t_full[1]:.3f} s CPU (best of {args.repeat})")
    print(f"peak RSS (process):  {rss_mib:.1f} MiB; peak traced Python allocations: {traced_mib:.1f} MiB")
    print(f"peak {result['peak_concurrency']}, recommended {result['recommended_concurrency']}")
    print("level  tok/s   req/s  kv_use  kv_peak  hit    preempt  evict  ttft_p50  ttft_p99")
    levels = result["levels"]
    assert isinstance(levels, list)
    for lv in levels:
        print(f"{lv['concurrency']:5d}  {lv['throughput_tokens_per_s']:6.1f}  {lv['requests_per_s']:5.2f}  "
              f"{lv['kv_usage']:6.3f}  {lv['kv_usage_peak']:7.3f}  {lv['prefix_hit_rate']:5.3f}  "
              f"{lv['preemptions']:7d}  {lv['evictions']:5d}  {lv['ttft_p50_s']:8.3f}  {lv['ttft_p99_s']:8.3f}")
    print("```")


if __name__ == "__main__":
    main()

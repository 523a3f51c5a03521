"""KV-bytes core benchmark: shape_from_config + rank_kv + per_request_bytes for real configs.

Run: .venv/bin/python bench/bench_kvbytes.py   (prints a Markdown table; paste into RESULTS-kvbytes.md)
Target (issue 2): a kv-bytes computation well under 1 ms. Each figure is the median (and p90) of
many repetitions in one process, after a warm-up, so a noisy shared machine moves it less.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path

from timing import median_p90

from app.core.kvspec import rank_kv
from app.core.model_config import shape_from_config

CONFIGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "configs"
CASES: list[tuple[str, int, int, int]] = [  # config, tp, pp, max_model_len
    ("llama31-8b", 1, 1, 131072),
    ("llama31-70b", 4, 2, 131072),
    ("qwen3-235b-a22b-fp8", 8, 1, 32768),
    ("deepseek-r1", 8, 1, 163840),
    ("gpt-oss-120b", 2, 1, 131072),
    ("qwen3-next-80b", 2, 1, 262144),
    ("qwen3-vl-30b-a3b", 4, 1, 65536),
]


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median, p90) wall time in milliseconds."""
    return median_p90(fn, repeat, warmup=20)


def one_call(config: dict[str, object], tp: int, pp: int, max_model_len: int) -> int:
    shape = shape_from_config(config)
    rkv = rank_kv(shape, tp=tp, pp=pp)
    rkv.largest_max_model_len(40 * 2**30, 8192, upper=max_model_len)
    return rkv.per_request_bytes(max_model_len, 8192)


def rank_only(config: dict[str, object], tp: int, pp: int, max_model_len: int) -> Callable[[], int]:
    shape = shape_from_config(config)
    return lambda: rank_kv(shape, tp=tp, pp=pp).per_request_bytes(max_model_len, 8192)


def main() -> None:
    print("| config | tp | pp | max_model_len | full call median ms | p90 ms | rank_kv only median ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for name, tp, pp, mml in CASES:
        config = json.loads((CONFIGS / f"{name}.json").read_text())
        median, p90 = timed(partial(one_call, config, tp, pp, mml), repeat=2000)
        rank_median, _ = timed(rank_only(config, tp, pp, mml), repeat=2000)
        worst = max(worst, p90)
        print(f"| {name} | {tp} | {pp} | {mml:,} | {median:.3f} | {p90:.3f} | {rank_median:.3f} |")
    print(f"\nworst p90: {worst:.3f} ms (target: well under 1 ms) — {'PASS' if worst < 1 else 'FAIL'}")


if __name__ == "__main__":
    main()

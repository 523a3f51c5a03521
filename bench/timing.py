"""Wall-time sampling shared by the benchmarks (run as scripts: `bench/` is on sys.path)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def samples_ms(fn: Callable[[], object], repeat: int, warmup: int = 1) -> list[float]:
    """Sorted wall times of `repeat` calls in milliseconds, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return sorted(samples)


def median_p90(fn: Callable[[], object], repeat: int, warmup: int = 3) -> tuple[float, float]:
    samples = samples_ms(fn, repeat, warmup)
    return statistics.median(samples), samples[int(len(samples) * 0.9)]


def median_p95_max(fn: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    samples = samples_ms(fn, repeat)
    return statistics.median(samples), statistics.quantiles(samples, n=20)[-1], samples[-1]

"""A ramp over concurrency levels: the throughput peak and the recommended operating point.

Every level (and the ramp without a shared prefix) replays the same request stream, drawn
once from the seeded RNG, so the levels differ only in concurrency (common random numbers).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.core.sim.cost import CostModel
from app.core.sim.engine import Engine
from app.core.sim.state import SchedulerConfig, SimCancelled
from app.core.sim.tier import TierConfig
from app.core.sim.workload import RequestSpec, Workload, make_requests, without_sharing

RECOMMENDATION_RULE = (
    "a step below the throughput peak (output tokens/s): the highest concurrency below the peak with "
    "no preemptions, since the peak sits at the cliff's edge and production's length tail is heavier "
    "than the sample's (seed 002: peak 16, operate at 12); none if no level below the peak runs "
    "without preemptions. When the peak is the ramp's top level the cliff lies beyond the ramp: the "
    "highest preemption-free level tried (recommendation_basis 'ramp_top'; add higher levels)"
)


@dataclass(frozen=True, slots=True)
class SimConfig:
    blocks: int
    block_size: int = 16
    workload: Workload = field(default_factory=Workload)
    requests_per_level: int = 2000
    ramp: tuple[int, ...] = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    cost: CostModel = field(default_factory=CostModel)
    tier: TierConfig | None = None  # an offload tier behind the pool (app.core.sim.tier)


Progress = Callable[[float], None]
Cancel = Callable[[], bool]


def run_level(cfg: SimConfig, requests: list[RequestSpec], concurrency: int,
              cancel: Cancel | None = None, tick: Progress | None = None) -> dict[str, object]:
    engine = Engine(blocks=cfg.blocks, block_size=cfg.block_size, sched=cfg.scheduler, cost=cfg.cost,
                    requests=requests, concurrency=concurrency,
                    prefix_tokens=cfg.workload.shared_prefix_tokens, tier=cfg.tier)
    return engine.run(cancel, tick)


def run_levels(cfg: SimConfig, requests: list[RequestSpec], *, progress: Progress | None = None,
               cancel: Cancel | None = None, done: int = 0, total: int = 1) -> list[dict[str, object]]:
    """Every level of the ramp; ``progress`` gets the fraction of ``total`` levels done."""
    out: list[dict[str, object]] = []
    for level in cfg.ramp:
        if cancel is not None and cancel():
            raise SimCancelled
        tick = None
        if progress is not None:
            base = done

            def tick(fraction: float, base: int = base) -> None:
                progress(min(base + fraction, base + 1) / total)

        out.append(run_level(cfg, requests, level, cancel, tick))
        done += 1
        if progress is not None:
            progress(done / total)
    return out


def _throughput(level: dict[str, object]) -> float:
    value = level["throughput_tokens_per_s"]
    assert isinstance(value, float)
    return value


def peak_index(levels: Sequence[dict[str, object]]) -> int:
    """The level with the highest throughput (the lowest such level on a tie)."""
    best = 0
    for i, level in enumerate(levels):
        if _throughput(level) > _throughput(levels[best]):
            best = i
    return best


def recommend_index(levels: Sequence[dict[str, object]]) -> tuple[int | None, str]:
    """Index of the level :data:`RECOMMENDATION_RULE` picks (or None) and the basis: ``"rule"``,
    ``"ramp_top"`` or ``"none"`` (results stored before stop 28 may also say ``"fallback"``)."""
    peak = peak_index(levels)
    top = peak == len(levels) - 1  # throughput still rising at the last level: no cliff in the ramp
    calm = [i for i in range(peak + 1 if top else peak) if levels[i]["preemptions"] == 0]
    if not calm:
        return None, "none"
    return calm[-1], "ramp_top" if top else "rule"


def simulate(cfg: SimConfig, rng: random.Random, *, progress: Progress | None = None,
             cancel: Cancel | None = None) -> dict[str, object]:
    """The ramp, its peak and recommendation, and the same ramp without a shared prefix."""
    requests = make_requests(cfg.workload, cfg.requests_per_level, rng)
    shares = any(r.group >= 0 for r in requests) and cfg.scheduler.enable_prefix_caching
    total = 2 * len(cfg.ramp) if shares else len(cfg.ramp)
    levels = run_levels(cfg, requests, progress=progress, cancel=cancel, total=total)
    if shares:
        plain = run_levels(cfg, without_sharing(requests), progress=progress, cancel=cancel,
                           done=len(cfg.ramp), total=total)
    else:
        plain = levels
    peak, (rec, basis) = peak_index(levels), recommend_index(levels)
    plain_peak = peak_index(plain)
    peak_tps, plain_tps = _throughput(levels[peak]), _throughput(plain[plain_peak])
    return {
        "levels": levels,
        "peak_concurrency": cfg.ramp[peak],
        "peak_throughput_tokens_per_s": peak_tps,
        "recommended_concurrency": None if rec is None else cfg.ramp[rec],
        "recommendation_rule": RECOMMENDATION_RULE,
        "recommendation_basis": basis,
        "without_prefix": {
            "levels": plain,
            "peak_concurrency": cfg.ramp[plain_peak],
            "peak_throughput_tokens_per_s": plain_tps,
            "prefix_reuse_throughput_gain": peak_tps / plain_tps - 1.0 if plain_tps > 0 else 0.0,
        },
    }

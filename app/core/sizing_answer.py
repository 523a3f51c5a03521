"""The answer of a sizing search: ranked options, near misses with what they lack, the front.

Ranking (issue 13): the fewest GPUs, then the fewest compromises (unquantized weights before
`--quantization fp8`, the model's KV dtype before fp8 KV), then the most headroom over the target,
then fewer engines per GPU, fewer pipeline stages, smaller TP (simpler layouts) and the preset name
(a stable order). Each engine configuration is listed once, at the fewest replicas that meet the
target: more replicas of it only add GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from app.core.sizing import (
    Candidate,
    EngineConfig,
    EngineOutcome,
    Evaluate,
    Space,
    Target,
    engine_configs,
    meets,
    replica_counts,
    smallest_meeting,
    space_size,
)

NEAR_MISSES = 8
#: Plans one engine configuration at one replica count (MoE models: the experts are split over dp).
EvaluateAt = Callable[[EngineConfig, int], "EngineOutcome | str"]


@dataclass(frozen=True)
class Planned:
    """One configuration's outcome for every replica count, or (``by_dp``) one per replica count
    when the engine's plan depends on dp (a MoE model's experts are split over tp × dp)."""

    config: EngineConfig
    outcome: EngineOutcome  # at the first replica count
    by_dp: tuple[EngineOutcome, ...] = ()

    def at(self, dp: int) -> EngineOutcome:
        return self.by_dp[dp // self.config.engines_per_gpu - 1] if self.by_dp else self.outcome

    def counts(self, max_gpus: int) -> range:
        """The replica counts this configuration was planned at (all of them for one outcome)."""
        counts = replica_counts(self.config, max_gpus)
        return counts[: len(self.by_dp)] if self.by_dp else counts

    def fewest_meeting(self, target: Target, max_gpus: int) -> int | None:
        if not self.by_dp:
            return smallest_meeting(self.config, self.outcome, target, max_gpus)
        return next((dp for dp in self.counts(max_gpus) if meets(Candidate(self.config, self.at(dp), dp), target)),
                    None)  # fmt: skip


@dataclass
class Answer:
    options: list[Candidate]
    near_misses: list[tuple[Candidate, str]]
    excluded: list[tuple[EngineConfig, str]]
    searched: int
    evaluated: int
    #: Configurations not planned: N engines on a card whose whole budget (one engine) held no KV.
    skipped: int = 0
    #: (gpus, concurrency) → the best candidate there, per GPU preset (the chart's lines).
    by_gpu: dict[str, list[Candidate]] = field(default_factory=dict)
    pareto: list[Candidate] = field(default_factory=list)


def headroom(candidate: Candidate, target: Target) -> float:
    """How far past the target a candidate is (0.25: 25 % more than needed); the tightest ratio."""
    ratios = []
    if target.concurrency is not None:
        ratios.append(candidate.concurrency / target.concurrency)
    if target.tokens is not None:
        ratios.append(candidate.schedulable_tokens / target.tokens)
    if not ratios:
        ratios.append(candidate.outcome.largest_max_model_len / target.max_model_len)
    return min(ratios) - 1.0


def headroom_text(value: float | None) -> str:
    """A headroom for people: "+25 %" up to 10x the target, then the multiple of the target ("4,096x"):
    "+409500 %" for a 1-request target said nothing readable."""
    if value is None:
        return "-"
    if value + 1.0 >= 10.0:
        return f"{value + 1.0:,.0f}x"
    return f"{value:+.0%}".replace("%", " %")


def rank_key(candidate: Candidate, target: Target) -> tuple[object, ...]:
    c = candidate.config
    quantized, low_kv = c.compromises
    return (
        candidate.gpus, quantized + low_kv, quantized, low_kv, -round(headroom(candidate, target), 9),
        c.engines_per_gpu, c.pp, c.tp, c.gpu, -c.card_utilization, c.kv_cache_dtype,
    )  # fmt: skip


def closeness(candidate: Candidate, target: Target) -> float:
    """How near a candidate that misses comes (1.0 would meet it); one that cannot start is 0."""
    o = candidate.outcome
    if not o.starts:
        return 0.0
    if not o.fits_max_model_len:
        return 0.5 * min(1.0, o.largest_max_model_len / target.max_model_len)
    return max(0.5, 1.0 + headroom(candidate, target))


def missing(candidate: Candidate, target: Target, max_gpus: int, per_dp: bool = False) -> str | None:
    """What the candidate lacks, the first limit that fails (None: it meets the target). ``per_dp``:
    the engine's plan improves with dp, so the replicas past max_gpus are an upper bound."""
    if meets(candidate, target):
        return None
    c, o = candidate.config, candidate.outcome
    where = f"{c.describe} × {candidate.dp} ({candidate.gpus} GPU{'s' if candidate.gpus != 1 else ''})"
    if not o.starts:
        return f"{c.describe}: does not start ({o.start_problem})"
    if not o.fits_max_model_len:
        return (f"{c.describe}: one {target.max_model_len:,}-token request does not fit "
                f"(the largest max_model_len that fits is {o.largest_max_model_len:,})")  # fmt: skip
    lacks = []
    if target.concurrency is not None and candidate.concurrency < target.concurrency:
        cap = (f"max_num_seqs {o.max_num_seqs:,} caps each engine" if o.max_num_seqs < o.concurrency_ceiling
               else f"each engine's KV pool holds {o.concurrency_ceiling:,}")  # fmt: skip
        lacks.append(f"{candidate.concurrency:,} of {target.concurrency:,} requests at "
                     f"{target.live_tokens:,} live tokens ({cap})")  # fmt: skip
    if target.tokens is not None and candidate.schedulable_tokens < target.tokens:
        lacks.append(f"{candidate.schedulable_tokens:,} of {target.tokens:,} schedulable tokens")
    text = f"{where}: " + "; ".join(lacks)
    if smallest_meeting(c, o, target, 10**9) is not None and smallest_meeting(c, o, target, max_gpus) is None:
        dp = smallest_meeting(c, o, target, 10**9) or 0
        most = "at most " if per_dp else ""
        text += f"; meeting it takes {most}{c.tp * c.pp * dp // c.engines_per_gpu:,} GPUs, over max_gpus={max_gpus}"
    return text


def search(space: Space, target: Target, evaluate: Evaluate, evaluate_at: EvaluateAt | None = None) -> Answer:
    """Every candidate of the space, evaluated once per engine configuration (``evaluate_at``
    given: once per configuration and replica count), and the answer."""
    outcomes: list[Planned] = []
    excluded: list[tuple[EngineConfig, str]] = []
    alone: dict[EngineConfig, EngineOutcome] = {}
    skipped = 0
    for config in engine_configs(space):
        whole = alone.get(replace(config, engines_per_gpu=1))
        if config.engines_per_gpu > 1 and whole is not None and whole.no_kv_room:
            skipped += 1  # a share of the card holds less than the whole card, which held nothing
            continue
        planned = _plan(config, space.max_gpus, evaluate, evaluate_at)
        if isinstance(planned, str):
            excluded.append((config, planned))
            continue
        outcomes.append(planned)
        if config.engines_per_gpu == 1 and evaluate_at is None:
            alone[config] = planned.outcome
    options = []
    for p in outcomes:
        dp = p.fewest_meeting(target, space.max_gpus)
        if dp is not None:
            options.append(Candidate(p.config, p.at(dp), dp))
    options.sort(key=lambda c: rank_key(c, target))
    bound = options[0].gpus if options else space.max_gpus + 1
    answer = Answer(options, _near_misses(outcomes, target, space.max_gpus, bound, evaluate_at is not None),
                    excluded, space_size(space), len(outcomes) + len(excluded), skipped)  # fmt: skip
    answer.by_gpu, answer.pareto = _fronts(outcomes, space.max_gpus, target)
    return answer


def _plan(config: EngineConfig, max_gpus: int, evaluate: Evaluate, evaluate_at: EvaluateAt | None) -> Planned | str:
    """One configuration planned once, or at each replica count up to the first it cannot plan
    (a layout the model or version refuses at that dp: larger counts are not offered)."""
    if evaluate_at is None:
        result = evaluate(config)
        return result if isinstance(result, str) else Planned(config, result)
    by_dp: list[EngineOutcome] = []
    for dp in replica_counts(config, max_gpus):
        result = evaluate_at(config, dp)
        if isinstance(result, str):
            if not by_dp:
                return result
            break
        by_dp.append(result)
    if not by_dp:
        return f"{config.label}: no replica count within max_gpus={max_gpus}"
    return Planned(config, by_dp[0], tuple(by_dp))


def _near_misses(
    outcomes: list[Planned], target: Target, max_gpus: int, bound: int, per_dp: bool = False
) -> list[tuple[Candidate, str]]:
    """Per configuration, its largest replica count below `bound` GPUs that misses the target;
    the closest first."""
    found: list[Candidate] = []
    for p in outcomes:
        config = p.config
        below = [dp for dp in p.counts(max_gpus) if config.tp * config.pp * dp // config.engines_per_gpu < bound]
        if not p.outcome.serves and not p.by_dp:
            below = below[:1]
        if below and not meets(cand := Candidate(config, p.at(below[-1]), below[-1]), target):
            found.append(cand)
    found.sort(key=lambda c: (-closeness(c, target), c.gpus, rank_key(c, target)))
    closest: dict[tuple[str, int, int, int], Candidate] = {}
    for cand in found:  # the closest of each layout (GPU, TP, PP, engines per GPU)
        closest.setdefault(cand.config.layout, cand)
    return [(c, missing(c, target, max_gpus, per_dp) or "") for c in list(closest.values())[:NEAR_MISSES]]


def _fronts(
    outcomes: list[Planned], max_gpus: int, target: Target
) -> tuple[dict[str, list[Candidate]], list[Candidate]]:
    """The best concurrency at each GPU count per preset, and the Pareto front over all presets
    (fewer GPUs or more concurrency; ties go to the better-ranked candidate)."""
    best: dict[tuple[str, int], Candidate] = {}
    for p in outcomes:
        for dp in p.counts(max_gpus):
            cand = Candidate(p.config, p.at(dp), dp)
            if not cand.outcome.serves or cand.outcome.concurrency <= 0:
                continue
            key = (p.config.gpu, cand.gpus)
            held = best.get(key)
            if held is None or (cand.concurrency, _rev(cand, target)) > (held.concurrency, _rev(held, target)):
                best[key] = cand
    by_gpu: dict[str, list[Candidate]] = {}
    for (gpu, _), cand in sorted(best.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        by_gpu.setdefault(gpu, []).append(cand)
    pareto: list[Candidate] = []
    for cand in sorted(best.values(), key=lambda c: (c.gpus, -c.concurrency, rank_key(c, target))):
        if not pareto or cand.concurrency > pareto[-1].concurrency:
            pareto.append(cand)
    return by_gpu, pareto


def _rev(candidate: Candidate, target: Target) -> tuple[int, ...]:
    """The compromise part of the ranking turned so that larger is better (a tie-break in a max)."""
    quantized, low_kv = candidate.config.compromises
    return (-(quantized + low_kv), -quantized, -low_kv, -candidate.config.engines_per_gpu, -candidate.config.pp)

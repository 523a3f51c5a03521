"""What would make a plan that will not start start (issue 17, item 4), each change with its result.

A plan starts when every rank passes vLLM's pre-flight and one max_model_len request fits
(`report.result_to_dict`'s `will_start`). For one that does not, each lever below is one change,
computed as a whole plan — the same ledger, admission and pre-flight as any plan — so its result
(starts or not, tokens) is the plan's own:

- the smallest TP degree vLLM accepts for the model that starts (estimated rows are re-estimated
  at that degree; measured rows are re-sharded as the TP what-if does);
- the smallest PP degree that starts at the plan's TP (estimated rows only: a measured run's stages
  cannot be re-cut from its rows);
- fp8 KV cache, fp8 weights (an unquantized checkpoint only);
- the smallest larger GPU preset that starts (estimated rows only), each rank keeping the memory
  another process held on it at start;
- the largest gpu_memory_utilization every rank's free memory at start holds, when the request is
  what fails;
- no manual `--kv-cache-memory-bytes` (the budget from gpu_memory_utilization) when the manual
  budget is what fails, and the largest max_model_len that fits when one request is what fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

from app.core.errors import InputError
from app.core.gpus import PRESETS
from app.core.ledger import Cell, requested_bytes
from app.core.plan import PlanInput, PlanResult, compute
from app.core.rank_columns import inputs_of, with_problems
from app.core.reestimate import all_estimated as _estimated
from app.core.reestimate import reestimated as _reestimated
from app.core.units import MIB, fmt_bytes
from app.core.whatif import Lever, can_quantize, kv_dtype_change, set_engine, set_quantization, set_tp

_PP_TRIED = (2, 3, 4, 6, 8, 16)
Sets = tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class StartLever:
    """A lever and what it sets, as plan-document paths (``("layout.tp", 4)``; None: unset)."""

    lever: Lever
    sets: Sets


def starts(result: PlanResult) -> bool:
    return all(lg.will_start for lg in result.ledgers) and result.admission.fits_max_model_len


Trial = tuple[str, Sets, Callable[[], PlanInput]]


def _resharded(plan: PlanInput, tp: int) -> PlanInput:
    return set_tp(plan, tp).plan


def _first_start(knob: str, trials: list[Trial], before: int) -> list[StartLever]:
    """The first trial that starts, as a lever ([] when none does)."""
    for change, sets, build in trials:
        try:
            result = compute(build())
        except InputError:
            continue
        if starts(result):
            return [_lever(knob, change, sets, before, result)]
    return []


def _lever(knob: str, change: str, sets: Sets, before: int, result: PlanResult) -> StartLever:
    after = result.admission.tokens
    return StartLever(Lever(knob, change, before, after, after - before, starts(result)), sets)


def _single(plan: PlanInput, before: int) -> list[StartLever]:
    """The one-step levers: fp8 KV, fp8 weights, no manual budget."""
    engine, shape = plan.engine, plan.model.shape
    trials: list[tuple[str, Trial]] = []
    if engine.kv_cache_dtype in ("auto", "bfloat16", "float16", "float32") and shape is not None:
        change = f"{engine.kv_cache_dtype} → fp8 KV cache"
        trials.append(("kv_cache_dtype", (change, (("engine.kv_cache_dtype", "fp8"),),
                                          lambda: kv_dtype_change(plan, "fp8").plan)))
    if shape is not None and can_quantize(plan):
        trials.append(("quantization", (f"{shape.dtype} → fp8 weights", (("engine.quantization", "fp8"),),
                                        lambda: set_quantization(plan, "fp8").plan)))
    if engine.kv_cache_memory_bytes is not None:
        change = f"no --kv-cache-memory-bytes (the budget from utilization {engine.gpu_memory_utilization})"
        trials.append(("kv_cache_memory_bytes", (change, (("engine.kv_cache_memory_bytes", None),),
                                                 lambda: set_engine(plan, kv_cache_memory_bytes=None).plan)))
    out = []
    for knob, (change, sets, build) in trials:
        try:
            out.append(_lever(knob, change, sets, before, compute(build())))
        except InputError:
            continue
    return out


def _max_model_len(plan: PlanInput, result: PlanResult, before: int) -> list[StartLever]:
    largest = result.admission.largest_max_model_len
    if result.admission.fits_max_model_len or not largest or largest <= 0:
        return []
    changed = compute(set_engine(plan, max_model_len=largest).plan)
    change = f"max_model_len {plan.engine.max_model_len:,} → {largest:,}"
    return [_lever("max_model_len", change, (("engine.max_model_len", largest),), before, changed)]


def _layouts(plan: PlanInput, allowed_tp: tuple[int, ...], before: int) -> list[StartLever]:
    """The smallest TP that starts, and (estimated rows) the smallest PP that starts at this TP."""
    estimated, tp, pp = _estimated(plan), plan.layout.tp, plan.layout.pp
    out = _first_start("tensor_parallel_size", [
        (f"TP {tp} → {t} (the smallest TP that starts on this GPU)", (("layout.tp", t),),
         partial(_reestimated, plan, tp=t) if estimated else partial(_resharded, plan, t))
        for t in allowed_tp if t > tp
    ], before)
    shape = plan.model.shape
    if estimated and shape is not None:
        out += _first_start("pipeline_parallel_size", [
            (f"PP {pp} → {p} (the smallest PP that starts at TP {tp})", (("layout.pp", p),),
             partial(_reestimated, plan, pp=p))
            for p in _PP_TRIED if pp < p <= shape.num_layers
        ], before)
    return out


def _larger_card(plan: PlanInput, before: int) -> list[StartLever]:
    first = plan.ranks[0] if plan.ranks else None
    if not _estimated(plan) or first is None or first.total is None:
        return []
    current = first.total.bytes
    used = current - first.free_at_start.bytes if first.free_at_start is not None else 0
    bigger = sorted((p for p in PRESETS if p.total_bytes > current), key=lambda p: p.total_bytes)
    return _first_start("gpu", [
        (f"a larger card: {p.name} ({fmt_bytes(p.total_bytes)} for vLLM, was {fmt_bytes(current)})",
         (("gpu.total", p.total_bytes), ("gpu.name", p.name),
          *((("gpu.free_at_start", _free_on(p.total_bytes, used)),) if used else ())),
         partial(_with_usage, plan, partial(_reestimated, plan, total=p.total_bytes, gpu_name=p.name)))
        for p in bigger
    ], before)


def _free_on(total_bytes: int, used_bytes: int) -> int:
    """Free memory at start on a new card: its total less the memory in use, rounded down to whole MiB
    (at most 1 MiB less: a card is never made roomier), so the plan page's link gives it as the form's
    size text ("38225MiB") and reopens exactly this plan; a byte count (40082782290) was no unit a
    user types."""
    return (total_bytes - used_bytes) // MIB * MIB


def _with_usage(plan: PlanInput, build: Callable[[], PlanInput]) -> PlanInput:
    """The re-estimated plan with each rank's memory in use at start (total − free: another process,
    as nvidia-smi showed it) carried to the new card, rank by rank; the re-estimate alone forgot it,
    so a card whose rank 0 held 12 GiB of someone else's memory 'started' on a larger preset."""
    moved = build()
    used = [r.total.bytes - r.free_at_start.bytes if r.total is not None and r.free_at_start is not None else 0
            for r in plan.ranks]
    if not any(used) or len(moved.ranks) % len(used):
        return moved
    ranks = tuple(
        replace(r, free_at_start=Cell(_free_on(r.total.bytes, used[i % len(used)]), "measured", "free at start on "
                                      "the new card: its total less the memory in use on this rank at start, "
                                      "in whole MiB"))
        if r.total is not None and used[i % len(used)] else r
        for i, r in enumerate(moved.ranks)
    )
    return replace(moved, ranks=ranks)


def _utilization(plan: PlanInput, result: PlanResult, before: int) -> list[StartLever]:
    """The largest utilization (two decimals) whose request every rank's free memory at start holds,
    when that request is what fails (vLLM's `request_memory` check, vllm/v1/worker/utils.py)."""
    if plan.engine.kv_cache_memory_bytes is not None:
        return []
    if not any(code == "free_below_requested" for lg in with_problems(result.ledgers) for code, _ in lg.problems):
        return []
    fits = [(r.total.bytes, r.free_at_start.bytes) for r in inputs_of(result.ledgers)
            if r.total is not None and r.free_at_start is not None]
    if not fits:
        return []
    util = min(free * 100 // total for total, free in fits) / 100
    while util > 0 and any(requested_bytes(total, util) > free for total, free in fits):
        util = round(util - 0.01, 2)
    if util <= 0 or util >= plan.engine.gpu_memory_utilization:
        return []
    changed = compute(set_engine(plan, gpu_memory_utilization=util).plan)
    change = (f"gpu_memory_utilization {plan.engine.gpu_memory_utilization} → {util} "
              "(what every rank's free memory at start holds)")
    return [_lever("gpu_memory_utilization", change, (("engine.gpu_memory_utilization", util),), before, changed)]


def start_levers(
    result: PlanResult, allowed_tp: tuple[int, ...] = (), plan: PlanInput | None = None
) -> tuple[StartLever, ...]:
    """For a plan that will not start, each change that makes it start (or, for the one-step knobs,
    what it gives), starting ones first; () for a plan that starts. ``plan``: the plan to try the
    changes on, when not the result's (e.g. reduced to the ranks that can bind, `lever_plan`)."""
    if starts(result):
        return ()
    plan, before = plan or result.plan, result.admission.tokens
    found = [
        *_layouts(plan, allowed_tp, before), *_single(plan, before), *_max_model_len(plan, result, before),
        *_utilization(plan, result, before), *_larger_card(plan, before),
    ]
    return tuple(sorted(found, key=lambda sl: not sl.lever.will_start))

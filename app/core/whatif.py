"""What-if transforms: pure plan → plan functions that say which cells they changed.

Each transform returns the new plan plus the dotted names of the cells it changed and of the
cells that became estimates. Knobs that only change settings (utilization, KV dtype, block
size, max_model_len, max_num_seqs, reserves, live tokens) keep every measured row. Knobs that
change what vLLM profiles (TP degree, prefill chunk) re-estimate the rows they move.

A measured KV room (vLLM's "Available KV cache memory") holds only for the run it was measured
in: every transform moves it by what the change moves inside the budget, Δkv = Δrequested −
Δ(weights + non_torch + activation). Utilization moves `requested` exactly (ceil(total × u),
the ledger's rule), so the moved room is derived from measured cells; the row deltas of the
other knobs are estimates, and so is the room they move.

- TP degree a → b: weights scale by a/b (sharded checkpoint); KV heads re-shard with the
  replication rule (KV spec recomputed); the activation peak is split into a part that shards
  and one that does not — measured × (u + s·a/b) with s, u from the model's shape — never the
  TP-a peak divided by b; non_torch gains communicator buffers when going from TP1 to TP > 1.
- prefill chunk (max_num_batched_tokens): activation moves by slope × Δtokens; the slope is
  the model-shape estimate, or a least-squares line through ≥ 2 measured (chunk, activation)
  points when the policy carries them. Sliding-window capacity moves through the KV spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from app.core.errors import InputError
from app.core.estimates import activation_bytes, activation_slope, non_torch_bytes, weights_per_stage
from app.core.ledger import Cell, RankInput, Source, requested_bytes
from app.core.mla_rules import gpu_family, mla_block_size
from app.core.plan import PlanInput, Warning, compute, plan_estimate_context
from app.core.reestimate import all_estimated, reestimated
from app.core.shape import online_fp8_shape
from app.core.versions import card_scheduler_defaults, rules_for, scheduler_seqs


@dataclass(frozen=True)
class WhatIf:
    plan: PlanInput
    changed: tuple[str, ...]
    estimated: tuple[str, ...] = ()


def set_engine(plan: PlanInput, **changes: object) -> WhatIf:
    """Change engine settings (utilization, KV dtype, block size, max_model_len, max_num_seqs…)."""
    engine = replace(plan.engine, **changes)  # type: ignore[arg-type]
    if "max_model_len" in changes:  # a stated length replaces the assumed default
        engine = replace(engine, max_model_len_assumed=False)
    if "max_num_batched_tokens" in changes:  # likewise the scheduler's (start_levers._on_card keeps them)
        engine = replace(engine, max_num_batched_tokens_assumed=False)
    if "max_num_seqs" in changes:
        engine = replace(engine, max_num_seqs_assumed=False)
    changed = tuple(f"engine.{k}" for k in sorted(changes))
    new_plan = replace(plan, engine=engine)
    if "gpu_memory_utilization" in changes:
        changed += ("ranks[*].requested", "ranks[*].headroom", "ranks[*].kv")
        new_plan = _rooms_for_utilization(plan, new_plan)
    return WhatIf(new_plan, changed)


def kv_dtype_change(plan: PlanInput, dtype: str) -> WhatIf:
    """Another KV cache dtype. An MLA model whose block size nobody stated gets the size vLLM's MLA
    backend picks for the new dtype on the plan's card (on Hopper, 16 for a 16-bit cache and 64 for
    fp8: app.core.mla_rules), as the plan opened with that dtype does."""
    shape, engine = plan.model.shape, plan.engine
    if shape is None or not shape.is_mla or not engine.block_size_assumed:
        return set_engine(plan, kv_cache_dtype=dtype)
    picked = mla_block_size(plan.vllm_version, gpu_family(plan.gpu_name), dtype, DOCUMENT_BLOCK_SIZE)
    if picked == engine.block_size:
        return set_engine(plan, kv_cache_dtype=dtype)
    moved = set_engine(plan, kv_cache_dtype=dtype, block_size=picked)
    note = f"MLA block size {picked} (not {engine.block_size}): what vLLM's MLA backend runs a {dtype} cache with"
    return replace(moved, plan=replace(moved.plan, engine=replace(moved.plan.engine, block_size_assumed=True),
                                       notes=(*moved.plan.notes, note)))


#: The block size a plan document states when it states none (app.schemas.EngineDoc.block_size).
DOCUMENT_BLOCK_SIZE = 16


def _rooms_for_utilization(old: PlanInput, new: PlanInput) -> PlanInput:
    """Measured KV rooms moved by each rank's Δrequested (ceil(total × u), the ledger's rule)."""
    u_old, u_new = old.engine.gpu_memory_utilization, new.engine.gpu_memory_utilization
    if u_old == u_new or not _has_rooms(old):
        return new
    ceil = rules_for(old.vllm_version).requested_is_ceil
    moves: dict[int, tuple[int, str]] = {}  # by total: Δrequested and its note (a cluster has few GPU models)
    ranks = []
    for rank in old.ranks:
        room, total = rank.kv_room, rank.total
        if room is None or total is None:  # no total: utilization_notes says why it stays
            ranks.append(rank)
            continue
        move = moves.get(total.bytes)
        if move is None:
            moved = requested_bytes(total.bytes, u_new, ceil) - requested_bytes(total.bytes, u_old, ceil)
            note = f"measured KV room {moved:+,} B: requested moves with gpu_memory_utilization {u_old} → {u_new}"
            move = moves[total.bytes] = (moved, note)
        # `_moved_room(rank, rank, …)`: no row moves with utilization, so the room moves by Δrequested alone
        ranks.append(rank if move[0] == 0 else replace(rank, kv_room=Cell(room.bytes + move[0], "derived", move[1])))
    return replace(new, ranks=tuple(ranks))


def utilization_stuck(plan: PlanInput) -> tuple[str, ...]:
    """Labels of the ranks whose KV gpu_memory_utilization cannot move: a KV room measured without
    the GPU's total memory (requested = ceil(total × u) needs the total; vllm/v1/worker/utils.py,
    request_memory, v0.11), or a manual --kv-cache-memory-bytes, which replaces the budget."""
    if plan.engine.kv_cache_memory_bytes is not None:
        return tuple(r.label for r in plan.ranks)
    if not _has_rooms(plan):
        return ()
    return tuple(r.label for r in plan.ranks if r.kv_room is not None and r.total is None)


def _has_rooms(plan: PlanInput) -> bool:
    """Whether some rank has a measured KV room: no scan of the ranks on every tick when the plan
    carries its columns (`RankColumns.fast`: every rank has its total and none a room)."""
    columns = plan.columns
    if columns is not None and columns.ranks is plan.ranks and columns.fast:
        return False
    return any(r.kv_room is not None for r in plan.ranks)


def utilization_moves(plan: PlanInput) -> bool:
    """Whether a gpu_memory_utilization change can move any rank's KV (some rank has its total)."""
    return plan.engine.kv_cache_memory_bytes is None and any(r.total is not None for r in plan.ranks)


def utilization_notes(plan: PlanInput) -> tuple[str, ...]:
    """Said on every render, before any slider moves: which ranks utilization cannot move, and why."""
    if plan.engine.kv_cache_memory_bytes is not None:
        return ()  # the budget is manual: the flags and the ledger say so
    stuck = utilization_stuck(plan)
    if not stuck:
        return ()
    which = f"{', '.join(stuck[:4])}{', …' if len(stuck) > 4 else ''}"
    whose = "this plan's KV" if len(stuck) == len(plan.ranks) else f"the KV of {len(stuck)} rank(s)"
    return (
        f"gpu_memory_utilization has no effect on {whose}: the KV room of {which} was measured and the GPU's "
        "total memory is not known, so requested = total × utilization cannot be worked out; give each rank's "
        "total memory (`total` on the plan document's ranks) to let utilization move it",
    )


def _moved_room(before: RankInput, after: RankInput, requested_delta: int, note: str, source: Source) -> RankInput:
    """`after` with the measured KV room of `before` moved by what moved inside the budget:
    Δrequested − Δ(weights + non_torch + activation). (No transform moves the CUDA-graph row.)"""
    room = before.kv_room
    if room is None:
        return after
    rows_delta = sum(
        (_bytes(getattr(after, row)) - _bytes(getattr(before, row))) for row in ("weights", "non_torch", "activation")
    )
    delta = requested_delta - rows_delta
    if delta == 0:
        return replace(after, kv_room=room)
    # Not clamped at zero: what-ifs stack (TP, chunk, utilization, weights), and a room that one
    # step drives negative must come back exactly if the next frees memory. The ledger reads a
    # room ≤ 0 as "no memory for KV blocks", as it reads its own subtraction.
    return replace(after, kv_room=Cell(room.bytes + delta, source, note))


def _bytes(cell: Cell | None) -> int:
    return 0 if cell is None else cell.bytes


def set_policy(plan: PlanInput, **changes: object) -> WhatIf:
    policy = replace(plan.policy, **changes)  # type: ignore[arg-type]
    return WhatIf(replace(plan, policy=policy), tuple(f"policy.{k}" for k in sorted(changes)))


def _scaled(cell: Cell | None, num: int, den: int, note: str) -> Cell | None:
    if cell is None:
        return None
    return Cell(cell.bytes * num // den, "estimated", note)


def activation_per_token(plan: PlanInput, tp: int) -> float:
    """Bytes of activation peak per batched token: a measured fit if available, else the shape estimate."""
    points = sorted(set(plan.policy.activation_points))
    if len({p[0] for p in points}) >= 2:
        n = len(points)
        mean_x = sum(p[0] for p in points) / n
        mean_y = sum(p[1] for p in points) / n
        sxx = sum((p[0] - mean_x) ** 2 for p in points)
        sxy = sum((p[0] - mean_x) * (p[1] - mean_y) for p in points)
        return sxy / sxx
    shape = plan.model.shape
    if shape is None:  # priced by neither (set_max_num_batched_tokens leaves the rows and says so)
        return 0.0
    sharded, unsharded = activation_slope(shape, tp)
    return float(sharded + unsharded)


def _activation_delta(plan: PlanInput, tp: int, tokens: int) -> int:
    """How much the profile-run peak moves from the plan's TP/prefill chunk to (tp, tokens).

    A measured fit (policy.activation_points) moves it linearly; otherwise the difference of the
    profile-run model's peaks (app.core.profile_run), which is not linear: the peak is the larger
    of the forward and the sampler, and the sampler does not depend on the chunk or on TP.
    """
    old_tokens = plan.engine.max_num_batched_tokens
    shape = plan.model.shape
    if shape is None or len({p[0] for p in plan.policy.activation_points}) >= 2:
        return round(activation_per_token(plan, tp) * (tokens - old_tokens))
    old_ctx = plan_estimate_context(plan)
    new_ctx = replace(old_ctx, tp=tp, max_num_batched_tokens=tokens)
    return activation_bytes(shape, new_ctx) - activation_bytes(shape, old_ctx)


def set_max_num_batched_tokens(plan: PlanInput, tokens: int) -> WhatIf:
    """Move the prefill chunk: the activation row moves by slope × Δtokens on every rank; a
    defaulted max_num_seqs follows it as vLLM's does, and a chunk below max_num_seqs is refused
    (`versions.scheduler_seqs`: vLLM will not start)."""
    if tokens <= 0:
        raise InputError("engine.max_num_batched_tokens", f"must be a positive number of tokens, got {tokens}")
    e = plan.engine
    default_seqs = card_scheduler_defaults(plan.vllm_version, plan.gpu_total_bytes, plan.gpu_name, e.max_model_len)[1]
    seqs = scheduler_seqs(plan.vllm_version, tokens, None if e.max_num_seqs_assumed else e.max_num_seqs, default_seqs)
    engine = replace(e, max_num_batched_tokens=tokens, max_num_seqs=seqs)
    seqs_moved = ("engine.max_num_seqs",) if seqs != e.max_num_seqs else ()
    if plan.model.shape is None and len({p[0] for p in plan.policy.activation_points}) < 2:
        # a model given as bytes per token has no shape to price the profile run's forward by (the
        # 0.09 MiB per batched token once assumed here had no source); say so rather than guess
        said = (f"prefill chunk {e.max_num_batched_tokens:,} → {tokens:,}: the activation row is not moved — no "
                "model shape (model.config or model.catalogue) and no calibration from two runs at different "
                "chunk sizes (policy.activation_points) to price it")
        moved = replace(plan, engine=engine, notes=(*plan.notes, said))
        return WhatIf(moved, ("engine.max_num_batched_tokens", *seqs_moved))
    delta = _activation_delta(plan, plan.layout.tp, tokens)
    note = f"activation moved by {delta:+,} B for {tokens - plan.engine.max_num_batched_tokens:+,} batched tokens"
    room_note = f"measured KV room moved against the activation row ({note})"
    ranks = tuple(
        _moved_room(r, replace(r, activation=Cell(max(0, r.activation.bytes + delta), "estimated", note)), 0,
                    room_note, "estimated")
        if r.activation is not None
        else _shift_room(r, -delta, room_note)
        for r in plan.ranks
    )
    return WhatIf(
        replace(plan, engine=engine, ranks=ranks),
        ("engine.max_num_batched_tokens", *seqs_moved, "ranks[*].activation", "ranks[*].kv"),
        ("ranks[*].activation",),
    )


def _shift_room(rank: RankInput, delta: int, note: str) -> RankInput:
    if rank.kv_room is None:
        return rank
    return replace(rank, kv_room=Cell(rank.kv_room.bytes + delta, "estimated", note))  # not clamped: see _moved_room


def set_tp(plan: PlanInput, tp: int) -> WhatIf:
    """Re-shard the plan to another TP degree (one engine of tp × pp ranks)."""
    old = plan.layout.tp
    if tp <= 0:
        raise InputError("layout.tp", f"must be a positive whole number, got {tp}")
    if tp == old:
        return WhatIf(plan, ())
    new_plan = replace(plan, layout=replace(plan.layout, tp=tp))
    ranks = tuple(_reshard_rank(plan, new_plan, r, i, old, tp) for i, r in enumerate(_template_ranks(plan, tp)))
    changed = ("layout.tp", "ranks[*].weights", "ranks[*].activation", "ranks[*].non_torch", "kv_bytes_per_token")
    return WhatIf(replace(new_plan, ranks=ranks), changed, ("ranks[*].weights", "ranks[*].activation"))


def _template_ranks(plan: PlanInput, tp: int) -> tuple[RankInput, ...]:
    """The new engine's ranks: existing ranks first, cycling through them when the group grows."""
    count = tp * plan.layout.pp
    if not plan.ranks:
        return ()
    return tuple(plan.ranks[i % len(plan.ranks)] for i in range(count))


def _reshard_rank(plan: PlanInput, new_plan: PlanInput, rank: RankInput, index: int, old: int, tp: int) -> RankInput:
    label = f"PP{index // tp}_TP{index % tp}" if plan.layout.pp > 1 else f"TP{index}"
    act = rank.activation
    if act is not None and plan.model.shape is not None:
        old_ctx = plan_estimate_context(plan, tp=old)
        shape = plan.model.shape
        shift = activation_bytes(shape, replace(old_ctx, tp=tp)) - activation_bytes(shape, old_ctx)
        act = Cell(max(0, act.bytes + shift), "estimated", f"activation re-split TP{old}→TP{tp} ({shift:+,} B)")
    non_torch = rank.non_torch
    if non_torch is not None and plan.model.shape is not None and (old == 1) != (tp == 1):
        shape = plan.model.shape

        def nt(t: int) -> int:
            return non_torch_bytes(shape, plan_estimate_context(plan, tp=t))

        non_torch = Cell(max(0, non_torch.bytes + nt(tp) - nt(old)), "estimated", "communicator buffers re-estimated")
    resharded = replace(
        rank,
        label=label,
        weights=_scaled(rank.weights, old, tp, f"weights re-sharded TP{old}→TP{tp}"),
        activation=act,
        non_torch=non_torch,
    )
    note = f"measured KV room moved against the re-sharded rows TP{old}→TP{tp}; re-measure"
    moved = _moved_room(rank, resharded, 0, note, "estimated")
    if rank.kv_room is not None and moved.kv_room is rank.kv_room:
        # No row to move it by (a room measured alone): it still belongs to the other TP degree.
        moved = replace(moved, kv_room=_scaled(rank.kv_room, 1, 1, f"room measured at TP{old}; re-measure"))
    return moved


def set_quantization(plan: PlanInput, method: str) -> WhatIf:
    """Serve an unquantized checkpoint with `--quantization fp8`: every weight row shrinks by its
    stage's estimated ratio (linear and expert weights to one byte, the rest unchanged; see
    shape.online_fp8_shape), and a measured KV room grows by what the weights free."""
    if method != "fp8":
        raise InputError("whatif.quantization", f"only fp8 (online quantization) is modelled, got {method!r}")
    if plan.engine.quantization == method:
        return WhatIf(plan, ())
    stated = plan.model.stated_quantization
    if stated is not None:
        # Never re-estimate a measured weights row from the chosen model's config: the run's log
        # says its checkpoint is already quantized (a bf16 catalogue model would halve 16.96 GiB of
        # measured fp8 weights to 8.74 GiB).
        raise InputError("whatif.quantization", f"the run's log states quantization={stated}: its measured weights "
                         "are the quantized checkpoint's, so fp8 weights change nothing")
    shape = plan.model.shape
    if shape is None:
        raise InputError("whatif.quantization", "needs the model's config.json (or a catalogue model) to size weights")
    quantized = online_fp8_shape(shape)
    layout, ctx = plan.layout, plan_estimate_context(plan)  # the plan's vLLM release rules and MXFP4 backend
    before = weights_per_stage(shape, layout.tp, layout.pp, ctx.mxfp4_backend, ctx)
    after = weights_per_stage(quantized, layout.tp, layout.pp, ctx.mxfp4_backend, ctx)
    note = f"weights at fp8 (--quantization fp8): linear and expert weights at one byte, {shape.dtype} elsewhere"
    room_note = "measured KV room moved by the weights fp8 frees (estimated)"
    ranks = []
    for i, rank in enumerate(plan.ranks):
        stage = _stage_of(rank.label, i, layout.tp, layout.pp)
        weights = rank.weights
        if weights is not None:
            scaled = weights.bytes * after[stage] // max(1, before[stage])
            rank = _moved_room(rank, replace(rank, weights=Cell(scaled, "estimated", note)), 0, room_note, "estimated")
        elif rank.kv_room is not None:  # a room measured without its weights row: the estimated saving
            freed = before[stage] - after[stage]
            rank = replace(rank, kv_room=Cell(rank.kv_room.bytes + freed, "estimated",
                                              f"measured KV room + {freed:,} B of weights fp8 frees (estimated)"))
        ranks.append(rank)
    new_plan = replace(
        plan,
        model=replace(plan.model, shape=quantized),
        engine=replace(plan.engine, quantization=method),
        ranks=tuple(ranks),
    )
    return WhatIf(new_plan, ("engine.quantization", "ranks[*].weights", "ranks[*].kv"), ("ranks[*].weights",))


def can_quantize(plan: PlanInput) -> bool:
    """Whether `--quantization fp8` is a what-if for this plan: an unquantized checkpoint (by its
    config.json and by the run's log, `ModelInput.stated_quantization`) served without it."""
    shape = plan.model.shape
    return (shape is not None and shape.quantization is None and plan.engine.quantization is None
            and plan.model.stated_quantization is None)


def _stage_of(label: str, index: int, tp: int, pp: int) -> int:
    """A rank's pipeline stage: from its label (PP<n>_…) when it says, else from its position."""
    match = _PP_LABEL.match(label)
    stage = int(match.group(1)) if match else index // max(1, tp)
    return stage % max(1, pp)


_PP_LABEL = re.compile(r"^PP(\d+)")


@dataclass(frozen=True)
class Lever:
    knob: str
    change: str
    tokens_before: int
    tokens_after: int
    tokens_gained: int
    will_start: bool = True  # every rank passes pre-flight and one max_model_len request fits
    caveats: tuple[str, ...] = ()  # warnings the change brings that the plan did not have


def levers(plan: PlanInput, allowed_tp: tuple[int, ...] = ()) -> tuple[Lever, ...]:
    """Tokens gained by each knob, best first (seed 002: bytes-per-token levers scale capacity),
    with whether the changed plan still starts and the warnings the change brings."""
    before = compute(plan)
    base, base_codes = before.admission.tokens, {w.code for w in before.warnings}
    engine = plan.engine
    trials: list[tuple[str, str, WhatIf]] = []
    # Offered only when it can move this plan's numbers: not for a manual budget, not when every
    # rank's KV room was measured without its GPU's total (utilization_notes says so up front).
    if utilization_moves(plan) and engine.gpu_memory_utilization < 0.97:
        util = round(min(0.98, engine.gpu_memory_utilization + 0.03), 4)
        trials.append(
            (
                "gpu_memory_utilization",
                f"{engine.gpu_memory_utilization} → {util}",
                set_engine(plan, gpu_memory_utilization=util),
            )
        )
    if engine.kv_cache_dtype in ("auto", "bfloat16", "float16", "float32") and plan.model.shape is not None:
        trials.append(("kv_cache_dtype", f"{engine.kv_cache_dtype} → fp8", kv_dtype_change(plan, "fp8")))
    priced = plan.model.shape is not None or len({p[0] for p in plan.policy.activation_points}) >= 2
    if engine.max_num_batched_tokens > 1024 and priced:
        half = max(1024, engine.max_num_batched_tokens // 2)
        try:
            chunk = set_max_num_batched_tokens(plan, half)
        except InputError:  # below the plan's max_num_seqs: vLLM would not start (no lever)
            pass
        else:
            trials.append(("max_num_batched_tokens", f"{engine.max_num_batched_tokens:,} → {half:,}", chunk))
    shape = plan.model.shape
    if shape is not None and can_quantize(plan):
        trials.append(("quantization", f"{shape.dtype} → fp8 weights", set_quantization(plan, "fp8")))
    bigger = [t for t in allowed_tp if t > plan.layout.tp]
    if bigger and plan.model.shape is not None:
        trials.append(("tensor_parallel_size", f"{plan.layout.tp} → {bigger[0]}", set_tp(plan, bigger[0])))
    # An estimated plan's rows depend on the knobs (TP re-shards the replicated norms and rope unevenly,
    # the KV dtype and chunk move the CUDA graphs and the encoder profile): each lever's plan is
    # estimated afresh with the knob set, as the plan page at that value is, so the lever promises
    # what the page it points to shows.
    fresh = all_estimated(plan)
    out = []
    for knob, change, whatif in trials:
        try:
            result = compute(reestimated(whatif.plan) if fresh else whatif.plan)
        except InputError:
            continue
        after = result.admission.tokens
        starts = all(lg.will_start for lg in result.ledgers) and result.admission.fits_max_model_len
        out.append(Lever(knob, change, base, after, after - base, starts, _caveats(result.warnings, base_codes)))
    return tuple(sorted(out, key=lambda lv: (not lv.will_start, -lv.tokens_gained)))


def _caveats(warnings: tuple[Warning, ...], known: set[str]) -> tuple[str, ...]:
    """One line per warning code new to the plan ("… (and 7 more ranks)" for per-rank repeats)."""
    by_code: dict[str, list[str]] = {}
    for w in warnings:
        if w.code not in known and w.code != "estimated_rows":
            by_code.setdefault(w.code, []).append(w.message)
    return tuple(
        messages[0] + (f" (and {len(messages) - 1} more rank{'s' if len(messages) > 2 else ''})"
                       if len(messages) > 1 else "")
        for messages in by_code.values()
    )

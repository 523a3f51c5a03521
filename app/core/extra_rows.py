"""The ledger rows LoRA and speculative decoding add, attached to each rank before it is worked out.

vLLM loads the LoRA slots and the drafter inside the same ``DeviceMemoryProfiler`` as the target's
weights (``GPUModelRunner.load_model``, vllm/v1/worker/gpu_model_runner.py @28be48fa9), so a *measured*
weights row ("Model loading took") already holds them, and a measured activation row already holds
their profile-run peak. A row is therefore added only for what the measured rows do not hold:

- weights estimated → the slot bytes; activation estimated → the profile-run peak;
- weights / activation measured → they hold the LoRA of the run (``lora_in_run``: the document's own
  ``engine.lora`` beside measured rows), so the row is only the change a what-if makes to it;
- a measured KV room ("Available KV cache memory") nets both: the change moves the room itself.

Every rank also reports the whole estimate (``RankExtras``) whatever the rows hold: the JSON's
``lora_bytes`` / ``speculative_bytes``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.core.ledger import Cell, RankInput
from app.core.lora import LoraSpec, LoraTerms, lora_terms
from app.core.shape import ModelShape
from app.core.speculative import SpecSpec, draft_weight_bytes
from app.core.units import fmt_bytes
from app.core.versions import Version


@dataclass(frozen=True)
class RankExtras:
    """One rank's LoRA and draft estimates (bytes on this rank; None when the feature is off)."""

    lora_bytes: int | None = None
    lora_profile_bytes: int | None = None
    lora_modules: tuple[tuple[str, int], ...] = ()  # (module, slot bytes) summing to lora_bytes
    speculative_bytes: int | None = None


@dataclass(frozen=True)
class ExtraInputs:
    """What the rows depend on: the model, the layout and the engine's LoRA settings."""

    shape: ModelShape
    tp: int
    pp: int
    expert_parallel: bool
    version: Version
    max_num_batched_tokens: int
    lora: LoraSpec | None = None
    lora_in_run: LoraSpec | None = None  # the LoRA the measured rows were taken under (None: off)
    speculative: SpecSpec | None = None


def _measured(cell: Cell | None) -> bool:
    return cell is not None and cell.source == "measured"


def _slots(t: LoraTerms | None) -> int:
    return t.slot_bytes if t is not None else 0


def _peak(t: LoraTerms | None) -> int:
    return t.profile_bytes if t is not None else 0


def _lora_row(rank: RankInput, now: LoraTerms | None, run: LoraTerms | None) -> tuple[Cell | None, Cell | None]:
    """(the rank's lora row, its KV room moved by the change) — the slots and profile peak the
    measured rows do not already hold. ``run`` is what the measured rows were taken under."""
    in_weights = _measured(rank.weights) or rank.kv_room is not None
    in_activation = _measured(rank.activation) or rank.kv_room is not None
    slots = _slots(now) - (_slots(run) if in_weights else 0)
    peak = _peak(now) - (_peak(run) if in_activation else 0)
    held = [w for w, yes in (("weights", in_weights), ("activation", in_activation)) if yes]
    if held and run is None and now is None:
        return None, rank.kv_room
    note = now.note() if now is not None else "LoRA off"
    if held:
        run_bytes = "none" if run is None else fmt_bytes(_slots(run) + _peak(run))
        note = f"the measured {' and '.join(held)} hold the run's LoRA ({run_bytes}): this row is the change; {note}"
    room = rank.kv_room
    if room is not None and slots + peak:
        why = f"{room.note or 'measured KV room'} − LoRA change {fmt_bytes(slots + peak)}"
        room = Cell(room.bytes - slots - peak, "derived", why)
    return Cell(slots + peak, "derived" if held else "estimated", note), room


def _terms(inp: ExtraInputs, spec: LoraSpec | None, stage: int) -> LoraTerms | None:
    if spec is None:
        return None
    return lora_terms(inp.shape, spec, inp.tp, inp.pp, stage, inp.version,
                      inp.max_num_batched_tokens, inp.expert_parallel)  # fmt: skip


def with_extra_rows(
    ranks: tuple[RankInput, ...], inp: ExtraInputs
) -> tuple[tuple[RankInput, ...], tuple[RankExtras, ...]]:
    """The ranks with their ``lora`` row attached (stage of rank i: ``(i // tp) % pp``), and each
    rank's estimates. Ranks built from the same cells share one row (the ledger computes them once)."""
    if inp.lora is None and inp.lora_in_run is None:
        return _with_draft(ranks, inp, tuple(RankExtras() for _ in ranks))
    out: list[RankInput] = []
    extras: list[RankExtras] = []
    rows: dict[tuple[int, int, int, int], tuple[Cell | None, Cell | None]] = {}
    for i, rank in enumerate(ranks):
        stage = (i // inp.tp) % inp.pp
        now, run = _terms(inp, inp.lora, stage), _terms(inp, inp.lora_in_run, stage)
        key = (stage, id(rank.weights), id(rank.activation), id(rank.kv_room))
        if key not in rows:
            rows[key] = _lora_row(rank, now, run)
        cell, room = rows[key]
        out.append(rank if cell is None else replace(rank, lora=cell, kv_room=room))
        extras.append(RankExtras(now.slot_bytes, now.profile_bytes, now.modules) if now is not None else RankExtras())
    return _with_draft(tuple(out), inp, tuple(extras))


def _with_draft(
    ranks: tuple[RankInput, ...], inp: ExtraInputs, extras: tuple[RankExtras, ...]
) -> tuple[tuple[RankInput, ...], tuple[RankExtras, ...]]:
    """The ``speculative`` row: the draft's weights on ranks whose weights are estimated (measured
    weights hold the run's drafter: "Model loading took" includes it)."""
    spec = inp.speculative
    if spec is None:
        return ranks, extras
    nbytes, note = draft_weight_bytes(inp.shape, spec, inp.tp, inp.version, inp.max_num_batched_tokens)
    estimated = Cell(nbytes, "estimated", note)
    held = Cell(0, "derived", f"inside the measured weights ('Model loading took' includes the drafter); {note}")
    out = tuple(
        r if r.kv_room is not None else replace(r, speculative=held if _measured(r.weights) else estimated)
        for r in ranks
    )
    return out, tuple(replace(e, speculative_bytes=nbytes) for e in extras)

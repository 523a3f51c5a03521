"""Simulation documents: resolve `{"plan": {...}}` to the binding rank's block pool, then ramp."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.core.errors import InputError

JSON = dict[str, Any]


def resolve_pool(doc: Mapping[str, Any]) -> JSON:
    """The simulation document with `plan` replaced by the pool of the plan's binding rank."""
    if not isinstance(doc, Mapping):
        raise InputError("", "a simulation document must be a JSON object")
    if "plan" not in doc:
        return dict(doc)
    if "pool" in doc:
        raise InputError("pool", "give either plan or pool, not both")
    from app.services.plans import run_plan

    try:
        result = run_plan(doc["plan"], with_levers=False)
    except InputError as exc:
        raise exc.under("plan") from None
    out = {k: v for k, v in doc.items() if k != "plan"}
    out["pool"] = {"blocks": result["blocks"], "block_size": result["block_size"]}
    out["pool_source"] = (
        f"plan: binding rank {result['binding_rank']}, {result['blocks']:,} blocks of {result['block_size']} tokens"
    )
    scheduler = dict(out.get("scheduler") or {})
    scheduler.setdefault("max_num_seqs", result["engine"]["max_num_seqs"])
    scheduler.setdefault("max_num_batched_tokens", result["engine"]["max_num_batched_tokens"])
    out["scheduler"] = scheduler
    return out


def run_simulation(
    doc: Mapping[str, Any],
    *,
    max_work: int | None,
    progress: Callable[[float], None] | None = None,
    cancel: Callable[[], bool] | None = None,
) -> JSON:
    """Run a simulation document; bad input raises InputError naming the field."""
    from app.core.sim.io import simulate_from_json

    return simulate_from_json(resolve_pool(doc), max_work=max_work, progress=progress, cancel=cancel)

"""The application service over the pure core: plan documents in, JSON results out.

The CLI, the JSON API and the pages all come through `run_plan`: the document is turned into the
core's input (`plan_inputs`), computed, and returned as the JSON contract with its levers, the TP
degrees vLLM accepts and what would make a plan start; `compare` sets two results side by side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.core.audit import paired_labels
from app.core.checks import plan_checks
from app.core.errors import InputError
from app.core.kvspec import rank_kv
from app.core.ledger import RankInput
from app.core.plan import PlanInput, PlanResult, compute
from app.core.rank_columns import kv_column
from app.core.report import result_to_dict
from app.core.shape import ModelShape
from app.core.start_levers import start_levers
from app.core.whatif import Lever, levers
from app.schemas import validate_plan
from app.services.memo import memoised
from app.services.plan_inputs import LogReader, Prepared, build_plan, plan_input
from app.services.plan_terms import PlanTerms

JSON = dict[str, Any]


def allowed_tp_for(plan: PlanInput, limit: int = 64) -> tuple[int, ...]:
    """TP degrees vLLM accepts for the plan's model (every valid degree up to limit)."""
    shape = plan.model.shape
    if shape is None:
        return (1, 2, 4, 8)
    key = (shape, plan.layout.pp, plan.engine.kv_cache_dtype, plan.engine.block_size, limit)
    return memoised(("allowed_tp", *key), lambda: _allowed_tp(*key))  # the app's memo: once per model and layout


def _allowed_tp(shape: ModelShape, pp: int, dtype: str, block_size: int, limit: int) -> tuple[int, ...]:
    out = []
    for tp in range(1, limit + 1):
        try:
            rank_kv(shape, tp=tp, pp=pp, kv_cache_dtype=dtype, block_size=block_size)
        except InputError:
            continue
        out.append(tp)
    return tuple(out)


def _lever_json(lv: Lever) -> JSON:
    return {
        "knob": lv.knob,
        "change": lv.change,
        "tokens_before": lv.tokens_before,
        "tokens_after": lv.tokens_after,
        "tokens_gained": lv.tokens_gained,
        "will_start": lv.will_start,
        "caveats": list(lv.caveats),
    }


def _lists_ranks(doc: object) -> bool:
    """The document lists its GPUs rank by rank (nvidia-smi's, a log's): another card is not a change
    its plan page can make (`gpu=` is ignored on such a base), so no 'larger card' lever is offered."""
    ranks = doc.get("ranks") if isinstance(doc, Mapping) else getattr(doc, "ranks", None)
    return bool(ranks) or (isinstance(doc, Mapping) and doc.get("from_log") is not None)


def run_plan(
    doc: object,
    read_log: LogReader | None = None,
    with_levers: bool = True,
    check: bool = False,
    prepared: Prepared | None = None,
    terms: PlanTerms | None = None,
    lazy_rows: bool = False,
) -> JSON:
    """Validate, resolve and compute a plan document; the JSON result (with ``checks`` when asked).
    With `prepared`, the document's part before the what-if is reused (`plan_input`); with
    `terms`, the parts a slider tick does not change (`plan_terms`). The result is the same.
    `lazy_rows`: its per-rank lists are `app.core.json_rows.JsonRows`, each row made when read (a
    page reads a few of 1,024); `json_rows.plain_result` makes it plain JSON."""
    if terms is not None and prepared is None and read_log is None:
        plan = terms.plan_input(doc)
    else:
        plan = plan_input(doc, read_log, prepared)
    try:
        result = compute(plan)
    except InputError as exc:
        raise exc.under("engine") if exc.field in ("kv_cache_dtype", "block_size") else exc from None
    tps = allowed_tp_for(plan)
    lever_json = [_lever_json(lv) for lv in levers(lever_plan(result), tps)] if with_levers else []
    out = result_to_dict(result, lever_json, lazy_rows)
    out["allowed_tp"] = list(tps)
    # A plan that will not start: what would make it start, each with its result (issue 17 item 4).
    out["start_levers"] = (
        [] if out["will_start"]
        else [{**_lever_json(sl.lever), "sets": dict(sl.sets)} for sl in start_levers(result, tps, lever_plan(result))
              if not (_lists_ranks(doc) and any(path == "gpu.total" for path, _ in sl.sets))]
    )
    if check:
        out["checks"] = plan_checks(result)
        out["checks_pass"] = all(c["ok"] for c in out["checks"])
    return out


def _total_bytes(rank: RankInput) -> int:
    return rank.total.bytes if rank.total is not None else 0


def lever_plan(result: PlanResult, keep: int = 8) -> PlanInput:
    """The plan reduced to the ranks that can bind under a knob change, for pricing levers fast.

    A knob moves every rank's KV by the same amount (or in proportion to its total memory), so
    only the ranks with the least KV — and the one with the least total memory — can bind.
    """
    plan = result.plan
    if len(plan.ranks) <= 2 * keep:
        return plan
    kvs = kv_column(result.ledgers)  # no ledger object per rank (app.core.rank_columns)
    order = sorted(range(len(plan.ranks)), key=kvs.__getitem__)[:keep]
    smallest = min(range(len(plan.ranks)), key=lambda i: _total_bytes(plan.ranks[i]))
    chosen = sorted({*order, smallest})
    return replace(plan, ranks=tuple(plan.ranks[i] for i in chosen))


def allowed_tp(doc: object) -> list[int]:
    return list(allowed_tp_for(build_plan(validate_plan(doc))))


# --- imports and comparison (used by the pages and the API) -----------------------------------


_COMPARE_KEYS = (
    "kv_bytes_per_token",
    "page_bytes",
    "blocks",
    "tokens",
    "raw_tokens",
    "schedulable_tokens",
    "concurrency_ceiling",
    "max_concurrency_at_max_model_len",
    "vllm_kv_cache_size_tokens",
    "largest_max_model_len",
    "stranded_bytes",
)
_RANK_KEYS = (
    "total_bytes",
    "free_at_start_bytes",
    "requested_bytes",
    "headroom_bytes",
    "weights_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "activation_bytes",
    "kv_bytes",
    "blocks",
    "tokens",
)


def _delta(a: object, b: object) -> JSON:
    out: JSON = {"a": a, "b": b, "delta": None}
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        out["delta"] = round(b - a, 4) if isinstance(a, float) or isinstance(b, float) else b - a
    return out


def _layout_tp(result: Mapping[str, Any]) -> int | None:
    tp = (result.get("layout") or {}).get("tp")
    return tp if isinstance(tp, int) and not isinstance(tp, bool) and tp > 0 else None


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> JSON:
    """Two plan results side by side: every result and every rank row with its delta."""
    ranks_a = {r["rank"]: r for r in a.get("ranks", [])}
    ranks_b = {r["rank"]: r for r in b.get("ranks", [])}
    # ranks by label, else by TP/PP/DP place: a vLLM upgrade renames EngineCore_DP0 to EngineCore
    pairs = paired_labels(list(ranks_a), list(ranks_b), _layout_tp(a), _layout_tp(b))
    return {
        "results": {k: _delta(a.get(k), b.get(k)) for k in _COMPARE_KEYS},
        "binding_rank": {"a": a.get("binding_rank"), "b": b.get("binding_rank")},
        "ranks": [
            {
                "rank": shown,
                "rows": {k: _delta(ranks_a.get(x or "", {}).get(k), ranks_b.get(y or "", {}).get(k))
                         for k in _RANK_KEYS},
            }
            for shown, x, y in pairs
        ],
        "flags": {"a": a.get("flags", []), "b": b.get("flags", [])},
    }

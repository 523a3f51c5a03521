"""The parallel layout (TP/PP/DP/EP) a run states or its worker prefixes imply.

The engine-config line / non-default args state tensor_parallel_size, pipeline_parallel_size and
data_parallel_size: when stated, that is the size (exact). Otherwise the process prefixes of
the ranks that printed give lower bounds:
- an index `TPk`/`PPk`/`DPk`/`EPk` in a prefix means the size is at least k + 1;
- v0.10.2+ `Worker_…` names carry a dimension only when its group has more than one rank
  (vllm/v1/executor/multiproc_executor.py `WorkerProc.setup_proc_title_and_log_prefix`
  @28be48fa: `if tp_size > 1: process_name += f"_TP{tp_rank}"`, the same for DP/PP/PCP/DCP;
  `_EP{ep_rank}` whenever expert parallel is on), so an index there means at least 2;
- `EngineCore_DPn` (v1 engine core per DP rank) means DP ≥ n + 1;
- with expert parallel the EP group spans DP × TP (× PCP) ranks, DP-major
  (vllm/distributed/parallel_state.py `initialize_model_parallel`: the EP group is the
  transposed DP×PCP×TP block), so a worker `DPd_TPt_EPe` with d ≥ 1 and no PP/PCP in its name
  gives TP = (e − t) / d exactly, and EP ≥ DP × TP.
Lower bounds are never more than what the text shows: a layout with unprinted ranks is larger.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from app.ingest.vllm_log_model import Rank, Stated

_DIMS = (
    ("tp", "TP", "tensor_parallel_size"),
    ("pp", "PP", "pipeline_parallel_size"),
    ("dp", "DP", "data_parallel_size"),
)


def _entry(value: int | None, at_least: int | None, basis: str | None) -> dict[str, object]:
    return {"value": value, "at_least": at_least if value is None else value, "basis": basis}


def _bounds(ranks: Iterable[Rank]) -> tuple[dict[str, int], dict[str, list[str]], int | None, str | None]:
    low: dict[str, int] = {}
    seen: dict[str, list[str]] = {}
    tp_exact: int | None = None
    tp_from: str | None = None
    for r in ranks:
        par = dict(r.parallel)
        multiproc = (r.process or "").startswith("Worker_")
        for key in ("TP", "PP", "DP", "EP"):
            if key not in par:
                continue
            floor = par[key] + 1
            if multiproc or (key == "DP" and (r.process or "").startswith("EngineCore_DP")):
                floor = max(floor, 2) if multiproc else floor
            if floor > low.get(key, 0):
                low[key] = floor
            seen.setdefault(key, [])
            if r.rank not in seen[key]:
                seen[key].append(r.rank)
        d, t, e = par.get("DP"), par.get("TP", 0), par.get("EP")
        if d and e is not None and "PP" not in par and "PCP" not in par and (e - t) % d == 0 and tp_exact is None:
            tp_exact, tp_from = (e - t) // d, r.rank
    return low, seen, tp_exact, tp_from


def run_layout(ranks: Iterable[Rank], settings: Mapping[str, Stated]) -> dict[str, dict[str, object]]:
    """{"tp"|"pp"|"dp"|"ep": {"value": exact size or None, "at_least": lower bound or None, "basis"}}."""
    ranks = list(ranks)
    low, seen, tp_exact, tp_from = _bounds(ranks)
    out: dict[str, dict[str, object]] = {}
    for name, key, setting in _DIMS:
        stated = settings.get(setting)
        if stated is not None and isinstance(stated.value, int) and not isinstance(stated.value, bool):
            out[name] = _entry(stated.value, None, f"stated: {setting}={stated.value} (line {stated.line})")
        elif name == "tp" and tp_exact is not None and tp_exact >= low.get("TP", 1):
            out[name] = _entry(tp_exact, None, f"derived: EP index = DP index × TP + TP index in prefix {tp_from}")
        elif key in low:
            out[name] = _entry(None, low[key], f"at least: {key} indices in prefixes {', '.join(seen[key][:4])}")
        else:
            out[name] = _entry(None, None, None)
    if "EP" in low:
        tp, dp = out["tp"], out["dp"]
        floor = low["EP"]
        tp_n, dp_n = tp["at_least"], dp["at_least"]
        if isinstance(tp_n, int) and isinstance(dp_n, int):
            floor = max(floor, tp_n * dp_n)
        exact = tp["value"] is not None and dp["value"] is not None
        out["ep"] = _entry(
            floor if exact else None,
            floor,
            ("derived: EP = DP × TP" if exact else "at least: EP indices and DP × TP")
            + f" (prefixes {', '.join(seen['EP'][:4])})",
        )
    else:
        out["ep"] = _entry(None, None, None)
    return out

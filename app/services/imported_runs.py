"""What an imported run's plan knows beyond its memory rows: the model and the TP degree.

- The model: the catalogue entry or config.json the user chose on the import page (`model_doc`),
  else the one the log names (`evidence._model_for_run`). A run that names no model and states
  no max_model_len cannot be planned (the admission needs one request's length): the import says
  which fields to fill instead of making a plan that cannot compute.
- The TP degree, when the log does not state it and no worker prefix carries a TP index (V0
  `VllmWorkerProcess` / Ray workers are numbered by pid only, and a log excerpt need not hold
  every worker): the degree at which the model's per-rank page turns the smallest logged KV
  memory into exactly the block count the engine logged (vLLM V0 `determine_num_available_blocks`
  is `kv_bytes // page_bytes` on every worker, the engine keeps the minimum:
  vllm/worker/worker.py and vllm/executor/executor_base.py `initialize_cache`, v0.7.2). Only a
  unique degree within the printed precision is taken; public/39 (Qwen2.5-32B, 7.71 GiB per
  rank, '# CUDA blocks: 3947') is TP2: TP1 would give 1,973 blocks and TP4 7,894.
- Runs that state the same thing cost their residuals and their plan once per import
  (`per_distinct_run`; `log_residuals.add_residuals`): concatenated or repeated logs print the same
  engine start again under other line numbers, and neither the residuals nor the plan document
  read a line number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from app.core.errors import InputError
from app.core.kvspec import rank_kv
from app.core.model_config import shape_from_config

JSON = dict[str, Any]
T = TypeVar("T")
_TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def model_doc(catalogue: str, config_text: str, name: str = "") -> JSON | None:
    """The model section the import page's choices give: a catalogue slug, or a pasted config.json
    (an InputError naming `config` when it is not a JSON object); None when neither is given."""
    if catalogue:
        return {"catalogue": catalogue}
    if not config_text.strip():
        return None
    try:
        config = json.loads(config_text)
    except json.JSONDecodeError as exc:
        raise InputError("config", f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(config, dict):
        raise InputError("config", "a config.json must be a JSON object")
    out: JSON = {"config": config}
    label = name.strip() or (config.get("_name_or_path") if isinstance(config.get("_name_or_path"), str) else "")
    if label:
        out["name"] = str(label)[:120]
    return out


def model_config_of(model: Mapping[str, Any] | None) -> Mapping[str, object] | None:
    """The config.json a document's model section stands for (inline or catalogue), if any."""
    if not isinstance(model, Mapping):
        return None
    config = model.get("config")
    if isinstance(config, Mapping):
        return config
    if isinstance(model.get("catalogue"), str):
        from app.ingest.catalogue import get_model

        try:
            return get_model(model["catalogue"]).config_dict()
        except KeyError:
            return None
    return None


def tp_from_blocks(run: Mapping[str, Any], config: Mapping[str, object], pp: int = 1) -> int | None:
    """The unique TP degree at which the model's page reproduces the engine's logged block count
    from the smallest per-rank KV memory (within the KV line's printed precision), else None."""
    engine: Mapping[str, Any] = run.get("engine") or {}
    settings: Mapping[str, Any] = run.get("settings") or {}
    logged = _as_int(engine.get("num_gpu_blocks"))
    recs = [r for r in run.get("ranks") or [] if isinstance(r, Mapping) and _as_int(r.get("kv_bytes"))]
    if not logged or not recs:
        return None
    low = min(recs, key=lambda r: int(r["kv_bytes"]))
    kv, tol = int(low["kv_bytes"]), _as_int((low.get("tolerance") or {}).get("kv_bytes")) or 0
    try:
        shape = shape_from_config(config)
    except InputError:
        return None
    block_size = _as_int(engine.get("block_size")) or _as_int(settings.get("block_size")) or 16
    dtype = str(settings.get("kv_cache_dtype") or "auto")
    matches = []
    for tp in _TP_CANDIDATES:
        if tp < len(recs) // max(1, pp):
            continue  # fewer GPUs than the ranks that printed
        try:
            rkv = rank_kv(shape, tp=tp, pp=pp, kv_cache_dtype=dtype, block_size=block_size)
        except InputError:
            continue
        lo, hi = rkv.blocks_for(max(0, kv - tol)), rkv.blocks_for(kv + tol)
        if lo <= logged <= hi:
            matches.append(tp)
    return matches[0] if len(matches) == 1 else None


def require_length(doc: Mapping[str, Any]) -> None:
    """An imported run's document must let the plan know one request's length: a model with a
    config (catalogue or pasted) or a stated max_model_len."""
    model = doc.get("model") or {}
    engine = doc.get("engine") or {}
    if "kv_bytes_per_token" in model and not engine.get("max_model_len"):
        which = (f"the log's model {model['name']!r} is not in the catalogue" if model.get("name")
                 else "the log does not name its model")
        raise InputError(
            "model",
            f"{which} and states no max_model_len, so one request's size is unknown: choose the model in the "
            "Model list or paste its config.json, then import again",
        )


def require_whole_ranks(doc: Mapping[str, Any]) -> None:
    """An imported run's ranks must fit its layout (`plan.check_rank_count`, the rule its plan page
    applies): a run with more processes than workers — two start-ups glued together, a single-GPU
    EngineCore beside TP4 workers — got a "Make a plan" link whose page was a 422."""
    from app.core.plan import Layout, check_rank_count  # here: `kvledger import-log` loads no planner

    ranks = doc.get("ranks") or []
    given = doc.get("layout") or {}
    layout = Layout(tp=int(given.get("tp") or 1), pp=int(given.get("pp") or 1), dp=int(given.get("dp") or 1))
    try:
        check_rank_count(layout, len(ranks), bool(doc.get("ranks_partial")))
    except InputError as exc:
        labels = ", ".join(str(r.get("label") or "?") for r in ranks[:8] if isinstance(r, Mapping))
        raise InputError("ranks", f"this run's memory lines come from {len(ranks)} processes ({labels}"
                         f"{', …' if len(ranks) > 8 else ''}): {exc.message}; the log may hold two start-ups "
                         "glued together: import each on its own, or give TP and PP") from None


def graphs_in_budget(run: Mapping[str, Any]) -> bool:
    """Whether the run's KV budget had the CUDA-graph estimate taken out of it (v0.21+ default,
    opt-in before): then the ledger's CUDA-graph cell is the logged estimate, the amount vLLM
    subtracted (`available_kv = requested − non_kv − cudagraph_memory_estimate_applied`,
    vllm/v1/worker/gpu_worker.py `determine_available_memory` @28be48fa), not the capture's actual."""
    semantics = run.get("semantics")
    return isinstance(semantics, Mapping) and semantics.get("cuda_graphs_inside_budget") is True


def _ratio(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float | int) and not isinstance(value, bool) else "?"


def advice_notes(run: Mapping[str, Any]) -> list[str]:
    """vLLM's own utilization advice, once per distinct figure with the ranks that printed it: the
    utilization without CUDA-graph profiling equal to the current one, and the one that keeps the
    KV size of before (gpu_worker.py @28be48fa: current ∓ estimate / total, rounded to 4 places)."""
    seen: dict[tuple[str, str, str], list[str]] = {}
    for rec in run.get("ranks") or []:
        if not isinstance(rec, Mapping) or rec.get("util_suggested") is None:
            continue
        key = (_ratio(rec.get("hint_gpu_memory_utilization")), _ratio(rec.get("util_equivalent_without_cg")),
               _ratio(rec.get("util_suggested")))
        seen.setdefault(key, []).append(str(rec.get("rank")))
    notes = []
    for (current, equivalent, suggested), ranks in seen.items():
        who = ", ".join(ranks[:4]) + (f" and {len(ranks) - 4} more" if len(ranks) > 4 else "")
        if equivalent == "?":
            notes.append(f"vLLM's advice ({who}): with CUDA-graph memory profiling on "
                         f"(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1), --gpu-memory-utilization {suggested} keeps "
                         "this KV cache size")
            continue
        notes.append(f"vLLM's advice ({who}): --gpu-memory-utilization {current} with CUDA-graph memory profiling "
                     f"equals {equivalent} without it; {suggested} keeps the KV cache size of before")
    return notes


# Where a parsed run (issue-3 JSON) names a line: the keys `line`, `first_line`, `stated_line` (of
# findings, evidence, ranks, the version) with their number, `lines` ([first, last] of the run) and
# every word "line N" in a message or basis text. Written to start with the literal `line` (the
# regex engine then skips to each occurrence at C speed: 0.1 s for 10 MB of runs, not 0.5).
_LINE_REFS = re.compile(rb'line(?:(?<=["_]line)":(?:\d+|null)|(?<="line)s":\[\d+,\d+\]|(?<!\wline) \d+)')


def run_key(run: Mapping[str, Any]) -> bytes | None:
    """A parsed run's JSON with every line number taken out: two runs with one key state the same
    figures, settings, findings and version clues, only on other lines. None when the run cannot
    be written as JSON (an int past 64 bits): that run is computed on its own."""
    try:
        return _LINE_REFS.sub(b"", orjson.dumps(run))
    except TypeError:
        return None


def distinct_runs(runs: Sequence[Mapping[str, Any]]) -> list[int]:
    """Per run, the index of the first run with its `run_key` (its own index when it is the first,
    or when it has no key)."""
    first: dict[bytes, int] = {}
    out: list[int] = []
    for index, run in enumerate(runs):
        key = run_key(run)
        out.append(index if key is None else first.setdefault(key, index))
    return out


def per_distinct_run(
    runs: Sequence[Mapping[str, Any]], work: Callable[[int], T], firsts: Sequence[int] | None = None
) -> list[T]:
    """`work(i)` for every run index, computed once per distinct `run_key` and shared (the same
    object) by the runs that have that key. Only for work that reads no line number of the run.
    `firsts`: `distinct_runs(runs)` when already known (the grouping `add_residuals` used: runs it
    found the same got the same residuals, so they are still the same after)."""
    out: list[T] = []
    for index, first in enumerate(distinct_runs(runs) if firsts is None else firsts):
        out.append(work(index) if first == index else out[first])
    return out

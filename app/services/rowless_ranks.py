"""Ranks of an imported run that print no rows of their own (only a budget line).

vLLM V0 and its Ray/mp executors print the profiling rows on each worker, but an excerpt often
keeps only the driver's rows and another worker's budget line (vllm-project/vllm#13074: a TP8 ×
PP2 DeepSeek-R1 run on Ray; tests/data/vllm-logs/public/30). Such a rank must never get a
single-GPU estimate of the whole model. Its rows are taken from a measured rank of the same run
and the same pipeline stage when that is sound — one stage (PP 1, stated by the log or given with
the import), or both ranks labelled with the same PP<n> — and the same total memory; otherwise
the rank is left out (unknown, never zero) and the plan asks for the layout. Either way a note
says which it did.

Why the copy is sound (vllm/worker/worker.py `Worker.determine_num_available_blocks` @v0.7.2):
every worker budgets total × gpu_memory_utilization, one run-wide value, less its own weights,
non-torch and activation peak; TP shards of one stage hold the same weights and run the same
profile forward, so equal totals give the same rows and the same KV room. Different stages hold
different layers (and the first/last hold the embedding and head), so across stages it is not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.core.units import fmt_bytes

JSON = dict[str, Any]
ROWS = ("weights", "non_torch", "activation", "cuda_graphs")
_NEEDED = ("weights", "non_torch", "activation")
_COPIED = (*ROWS, "kv_room")
_PP = re.compile(r"(?:^|_)PP(\d+)(?:_|$)")
ASK = (
    "give the layout (TP and PP on the import page, or layout.tp and layout.pp in the plan document) "
    "so that its rows can be taken from a measured rank of the same pipeline stage"
)


def _stage(label: str) -> int | None:
    match = _PP.search(label)
    return int(match[1]) if match else None


def is_rowless(entry: Mapping[str, Any]) -> bool:
    """A rank entry with its budget (total) but no KV room and none of the profiling rows."""
    return "kv_room" not in entry and not any(r in entry for r in ROWS)


def _donor(entry: Mapping[str, Any], measured: list[JSON], pp: int | None) -> JSON | None:
    """A measured rank of the same stage and the same total memory, or None when none is sound."""
    stage = _stage(str(entry["label"]))
    for other in measured:
        if other.get("total") != entry.get("total"):
            continue
        if pp == 1 or (stage is not None and stage == _stage(str(other["label"]))):
            return other
    return None


def fill_rowless(ranks: list[JSON], pp: int | None) -> tuple[list[JSON], list[str]]:
    """The ranks with rowless ones filled from a same-stage measured rank or left out, and the notes
    that say which. ``pp``: the pipeline degree the log states or the import gives (None: unknown)."""
    measured = [r for r in ranks if not is_rowless(r) and all(k in r for k in _NEEDED)]
    out: list[JSON] = []
    notes: list[str] = []
    for entry in ranks:
        if not is_rowless(entry):
            out.append(entry)
            continue
        donor = _donor(entry, measured, pp)
        label, total = entry["label"], fmt_bytes(int(entry.get("total") or 0))
        if donor is not None:
            out.append({**entry, **{r: donor[r] for r in _COPIED if r in donor}})
            notes.append(
                f"rank {label} prints only its budget line ({total} total): its weights, non-torch, activation, "
                f"CUDA-graph and KV rows are rank {donor['label']}'s measured rows (same run, same pipeline stage, "
                "same total)"
            )
            continue
        if pp is None:
            why = "the log does not state the layout"
        elif pp == 1:
            why = "no rank of the run with the same total prints its rows"
        else:
            why = f"the log does not say which of the {pp} pipeline stages it is on"
        notes.append(
            f"rank {label} prints only its budget line ({total} total) and {why}: it is left out of the "
            f"ledger (unknown, not estimated), so the capacity shown is an upper bound; {ASK}"
        )
    return out, notes


def layout_notes(workers: int, layout: Mapping[str, Any]) -> list[str]:
    """What the plan assumed when a log of several workers states no layout (nor was one given)."""
    if workers <= 1:
        return []
    tp, pp = layout.get("tp", 1), layout.get("pp", 1)
    return [
        f"the log shows {workers} workers but states no layout: TP{tp} × PP{pp} is assumed, which sets the KV "
        "bytes per token of each rank and so its tokens; give TP and PP on the import page (layout.tp, layout.pp) "
        "if the run used others"
    ]

"""Result types of the vLLM log parser and their JSON form (the contract of issue 3).

Every number the log states is kept as a `Stated`: the value in the field's unit (bytes are
integers), the 1-based line that printed it, the text as printed and the tolerance implied by
the printed precision (half a unit of the last printed digit, in the field's unit; 0 for raw
bytes and integers). A field the log does not state is absent here and `null` in JSON.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

Value = int | float | str | bool

# Fields every rank / engine / settings record carries in JSON (null when not stated).
RANK_FIELDS: tuple[str, ...] = (
    "total_bytes",
    "free_at_start_bytes",
    "requested_bytes",
    "weights_bytes",
    "non_torch_bytes",
    "activation_bytes",
    "cuda_graph_bytes",
    "cuda_graph_estimate_bytes",
    "kv_bytes",
    "kv_tokens",
    "num_gpu_blocks",
    "max_concurrency",
)
ENGINE_FIELDS: tuple[str, ...] = (
    "num_gpu_blocks",
    "kv_tokens",
    "max_concurrency",
    "max_concurrency_tokens",
    "block_size",
)
SETTINGS_FIELDS: tuple[str, ...] = (
    "model",
    "gpu_memory_utilization",
    "max_model_len",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "data_parallel_size",
    "kv_cache_dtype",
    "block_size",
    "max_num_batched_tokens",
    "enforce_eager",
    "quantization",
    "kv_cache_memory_bytes",
    "max_num_seqs",
    "enable_prefix_caching",
    "dtype",
    "flashinfer_sampler",
    "allow_long_max_model_len",
)


class Stated(NamedTuple):
    """One value as the log states it, with its evidence (immutable)."""

    value: Value
    line: int
    printed: str
    tolerance: int | float = 0


@dataclass(frozen=True)
class Finding:
    """Something worth telling the user: a start-up error, an inconsistency, a note."""

    code: str
    message: str
    line: int | None
    severity: str = "info"
    numbers: Mapping[str, Value | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Rank:
    """What one worker process (or the unprefixed driver) printed about its own memory."""

    rank: str
    pid: int | None
    process: str | None
    ip: str | None
    parallel: Mapping[str, int]
    fields: Mapping[str, Stated]
    also: Mapping[str, tuple[Stated, ...]]
    first_line: int
    #: How its TP/PP index is known when its prefix gives none (app.ingest.vllm_log_rank_index).
    index_basis: str | None = None


@dataclass(frozen=True)
class VersionInfo:
    """The vLLM version the log states, and what its formats imply."""

    stated: str | None
    stated_line: int | None
    stated_source: str | None
    inferred_min: str | None
    inferred_max_exclusive: str | None
    basis: tuple[str, ...]


@dataclass(frozen=True)
class Semantics:
    """How to read "available KV" for this run (VLLM-NOTES §2.2)."""

    cuda_graphs_inside_budget: bool
    kv_cache_memory_bytes_set: bool
    basis: str


@dataclass(frozen=True)
class Run:
    """One engine start."""

    vllm_version: str | None
    version: VersionInfo
    semantics: Semantics
    settings: Mapping[str, Stated]
    non_default_args: Mapping[str, object]
    ranks: tuple[Rank, ...]
    engine: Mapping[str, Stated]
    engine_also: Mapping[str, tuple[Stated, ...]]
    findings: tuple[Finding, ...]
    first_line: int
    last_line: int
    layout: Mapping[str, Mapping[str, object]] = field(default_factory=dict)


@dataclass(frozen=True)
class LogParse:
    """All engine starts found in a text, plus findings about the text as a whole."""

    runs: tuple[Run, ...]
    findings: tuple[Finding, ...]


def _evidence(stated: Stated, also: tuple[Stated, ...] = ()) -> dict[str, object]:
    out: dict[str, object] = {"line": stated.line, "printed": stated.printed}
    if also:
        out["also"] = [{"line": s.line, "printed": s.printed} for s in also]
    return out


def _record(
    fixed: tuple[str, ...], fields: Mapping[str, Stated], also: Mapping[str, tuple[Stated, ...]]
) -> dict[str, object]:
    """Fixed fields (null when absent), then any extra stated fields, tolerance and evidence maps."""
    out: dict[str, object] = {name: None for name in fixed}
    tolerance: dict[str, int | float] = {}
    evidence: dict[str, object] = {}
    for name, stated in fields.items():
        out[name] = stated.value
        if not isinstance(stated.value, (str, bool)):
            tolerance[name] = stated.tolerance
        evidence[name] = _evidence(stated, also.get(name, ()))
    out["tolerance"] = tolerance
    out["evidence"] = evidence
    return out


def finding_to_json(f: Finding) -> dict[str, object]:
    out: dict[str, object] = {"code": f.code, "message": f.message, "line": f.line, "severity": f.severity}
    for key, value in f.numbers.items():
        out.setdefault(key, value)
    return out


def rank_to_json(r: Rank) -> dict[str, object]:
    out: dict[str, object] = {"rank": r.rank, "pid": r.pid}
    out.update(_record(RANK_FIELDS, r.fields, r.also))
    out["process"] = r.process
    out["ip"] = r.ip
    out["parallel"] = dict(r.parallel)
    if r.index_basis is not None:
        out["index_basis"] = r.index_basis
    out["first_line"] = r.first_line
    return out


def run_to_json(run: Run) -> dict[str, object]:
    settings = _record(SETTINGS_FIELDS, run.settings, {})
    settings["non_default_args"] = dict(run.non_default_args) if run.non_default_args else None
    v = run.version
    return {
        "vllm_version": run.vllm_version,
        "version": {
            "stated": v.stated,
            "stated_line": v.stated_line,
            "stated_source": v.stated_source,
            "inferred_min": v.inferred_min,
            "inferred_max_exclusive": v.inferred_max_exclusive,
            "basis": list(v.basis),
        },
        "semantics": {
            "cuda_graphs_inside_budget": run.semantics.cuda_graphs_inside_budget,
            "kv_cache_memory_bytes_set": run.semantics.kv_cache_memory_bytes_set,
            "basis": run.semantics.basis,
        },
        "settings": settings,
        "ranks": [rank_to_json(r) for r in run.ranks],
        "engine": _record(ENGINE_FIELDS, run.engine, run.engine_also),
        "findings": [finding_to_json(f) for f in run.findings],
        "lines": [run.first_line, run.last_line],
        "layout": {k: dict(v) for k, v in run.layout.items()},
    }


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic collector off for a block that allocates many small objects it keeps (a parse,
    its JSON form): with it on, collection after collection walks the growing heap, which makes a
    big log quadratic (10 MB of real logs: 3.5 s → 2.3 s for a whole import). Nothing built here
    forms a cycle; the collector's state is restored after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def log_parse_to_json(p: LogParse) -> dict[str, object]:
    """The JSON contract of issue 3: {"runs": [...], "findings": [...]} (plain dicts/lists)."""
    with gc_paused():
        return {"runs": [run_to_json(r) for r in p.runs], "findings": [finding_to_json(f) for f in p.findings]}

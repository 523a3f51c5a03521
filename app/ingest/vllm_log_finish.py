"""Finishing a run: engine figures, CUDA-graph estimate recovery, version and semantics.

- Engine figures printed several times resolve to the minimum (v0.8.2–v0.11.0 print one pre-min
  `GPU KV cache size`/concurrency pair per worker, VLLM-NOTES §2.2); `num_gpu_blocks is: N` and
  `num_gpu_blocks_override` win over printed block counts.
- The per-rank CUDA-graph estimate is recovered from the util-equivalence hint as
  (util − equivalent) × total (vllm/v1/worker/gpu_worker.py:482 @52a31ccec, VLLM-NOTES §1.3).
- Semantics: from v0.21.0 the estimate is subtracted from the KV budget (96a85c575, PR #38284);
  before, graphs were captured out of the `1 − utilization` headroom.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from app.ingest.vllm_log_layout import run_layout
from app.ingest.vllm_log_model import Finding, Rank, Run, Semantics, Stated, Value, VersionInfo
from app.ingest.vllm_log_prefix import DRIVER, Identity
from app.ingest.vllm_log_rank_index import Assignment, index_ranks

_MIN_FIELDS = ("kv_tokens", "max_concurrency", "num_gpu_blocks")
_VERSION_NUM = re.compile(r"^v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?")


@functools.lru_cache(maxsize=1024)  # a few distinct clue bounds, read for every run
def version_tuple(text: str) -> tuple[int, int, int] | None:
    m = _VERSION_NUM.match(text)
    if m is None:
        return None
    return int(m[1]), int(m[2]), int(m[3] or 0)


@dataclass
class RankAcc:
    ident: Identity
    first_line: int
    fields: dict[str, Stated] = field(default_factory=dict)
    also: dict[str, list[Stated]] = field(default_factory=dict)


@dataclass
class RunAcc:
    first_line: int
    last_line: int
    settings: dict[str, Stated] = field(default_factory=dict)
    args: dict[str, Value | None] = field(default_factory=dict)
    ranks: dict[str, RankAcc] = field(default_factory=dict)
    engine: dict[str, list[Stated]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    clues: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    versions: list[tuple[str, str, int]] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)
    has_memory: bool = False
    closed_code: str | None = None
    repeated: int = 0
    engine_printers: set[str] = field(default_factory=set)
    header_seen: bool = False
    conflicts: set[tuple[str, str]] = field(default_factory=set)
    closed_by: Identity | None = None  # the process that raised closed_code
    #: Each pid-labelled worker's "is assigned as" line (app.ingest.vllm_log_rank_index)
    assigned: dict[str, Assignment] = field(default_factory=dict)
    length: Value | None = None  # the max_model_len of the concurrency line or a start-up error
    stamps: dict[str, tuple[int, int, int, int, int]] = field(default_factory=dict)  # last header time per printer
    latest: tuple[int, int, int, int, int] | None = None  # the latest header time of the run's printers
    pids: dict[str, int] = field(default_factory=dict)  # the pid each process label printed under in this run
    worker_family: str | None = None  # the prefix style of this run's workers (vllm_log_runs._worker_family)


def _engine(acc: RunAcc) -> tuple[dict[str, Stated], dict[str, tuple[Stated, ...]], list[Finding]]:
    engine: dict[str, Stated] = {}
    also: dict[str, tuple[Stated, ...]] = {}
    notes: list[Finding] = []
    for name, items in acc.engine.items():
        best = min(items, key=lambda s: (float(s.value), s.line)) if name in _MIN_FIELDS else items[-1]
        engine[name] = best
        rest = tuple(s for s in items if s is not best)
        if rest:
            also[name] = rest
    final = engine.pop("num_gpu_blocks_final", None)
    if final is not None:
        printed = engine.get("num_gpu_blocks")
        engine["num_gpu_blocks"] = final
        also["num_gpu_blocks"] = tuple(acc.engine.get("num_gpu_blocks", ())) + also.get("num_gpu_blocks_final", ())
        if printed is not None and printed.value != final.value:
            notes.append(
                Finding(
                    "num_gpu_blocks_differs",
                    f"the engine used {final.value} blocks (line {final.line}) while {printed.value} were "
                    f"printed (line {printed.line})",
                    final.line,
                )
            )
        also.pop("num_gpu_blocks_final", None)
    override = _override_note(engine)
    if override is not None:
        notes.append(override)
    kv = acc.engine.get("kv_tokens", [])
    if len(kv) > 1:
        best = engine["kv_tokens"]
        notes.append(
            Finding(
                "engine_min_of_workers",
                f"{len(kv)} 'GPU KV cache size' lines (vLLM 0.8.2–0.11.0 print one per worker before taking "
                f"the minimum); the engine figure is the minimum, {best.value} tokens (line {best.line})",
                best.line,
                "info",
                {"lines": len(kv), "kv_tokens": best.value},
            )
        )
    return engine, also, notes


def _override_note(engine: dict[str, Stated]) -> Finding | None:
    """'Overriding num_gpu_blocks=P with num_gpu_blocks_override=N': the engine uses N blocks.

    vllm/v1/core/kv_cache_utils.py logs the override and uses N (since #11960, 2025-01; #19503
    2025-06 'Respect num-gpu-blocks-override in v1'); today's code reports the cache size the
    override leaves (@28be48fa, the comment at 'If `num_gpu_blocks_override` is set'), but some
    builds (public/26, v0.9.1 dev) printed 'GPU KV cache size' / concurrency from the profiled P
    blocks: tokens worth P blocks beside N blocks are not what the engine has.
    """
    profiled, used = engine.get("num_gpu_blocks_profiled"), engine.get("num_gpu_blocks")
    if profiled is None or used is None:
        return None
    tokens = engine.get("kv_tokens")
    numbers: dict[str, Value | None] = {"num_gpu_blocks": used.value, "num_gpu_blocks_profiled": profiled.value}
    text = (
        f"num_gpu_blocks_override: the engine uses {used.value} blocks, not the {profiled.value} it "
        f"profiled (line {used.line})"
    )
    stale = (
        tokens is not None
        and isinstance(tokens.value, int)
        and isinstance(profiled.value, int)
        and isinstance(used.value, int)
        and profiled.value != used.value
        and profiled.value > 0
        and tokens.value % profiled.value == 0
        and tokens.value != used.value * (tokens.value // profiled.value)
    )
    if not stale or tokens is None:
        return Finding("num_gpu_blocks_override", text, used.line, "info", numbers)
    per_block = int(tokens.value) // int(profiled.value)
    numbers.update(kv_tokens=tokens.value, block_size=per_block, kv_tokens_of_override=int(used.value) * per_block)
    return Finding(
        "num_gpu_blocks_override",
        f"{text}; yet 'GPU KV cache size' {tokens.printed} tokens (line {tokens.line}) = "
        f"{profiled.value} × {per_block}: "
        f"the token and concurrency lines count the profiled blocks, the engine has {int(used.value) * per_block} "
        "tokens",
        used.line,
        "warning",
        numbers,
    )


def _cg_from_hint(acc: RankAcc, settings: dict[str, Stated]) -> None:
    """(util − equivalent) × total → the per-rank CUDA-graph estimate (gpu_worker.py:482)."""
    eq = acc.fields.get("util_equivalent_without_cg")
    util = acc.fields.get("hint_gpu_memory_utilization") or settings.get("gpu_memory_utilization")
    total = acc.fields.get("total_bytes")
    if eq is None or util is None or total is None:
        return
    delta = float(util.value) - float(eq.value)
    value = round(delta * float(total.value))
    tol = round(
        (float(util.tolerance) + float(eq.tolerance)) * float(total.value) + abs(delta) * float(total.tolerance)
    )
    printed = f"({util.printed} − {eq.printed}) × {total.printed}"
    new = Stated(value, eq.line, printed, tol)
    old = acc.fields.get("cuda_graph_estimate_bytes")
    if old is None or float(old.tolerance) > tol:
        acc.fields["cuda_graph_estimate_bytes"] = new
        if old is not None:
            acc.also.setdefault("cuda_graph_estimate_bytes", []).append(old)
    else:
        acc.also.setdefault("cuda_graph_estimate_bytes", []).append(new)


def _version(acc: RunAcc) -> VersionInfo:
    stated = next((v for v in acc.versions if v[1] == "API server"), None) or (
        acc.versions[0] if acc.versions else None
    )
    lo_best: tuple[int, int, int] | None = None
    hi_best: tuple[int, int, int] | None = None
    basis: list[str] = []
    for name, (lo, hi, line) in acc.clues.items():
        basis.append(
            f"{name} (line {line}): {'≥' + lo if lo else ''}{' ' if lo and hi else ''}{'<' + hi if hi else ''}"
        )
        lt, ht = version_tuple(lo), version_tuple(hi)
        if lt is not None and (lo_best is None or lt > lo_best):
            lo_best = lt
        if ht is not None and (hi_best is None or ht < hi_best):
            hi_best = ht
    if lo_best is not None and hi_best is not None and lo_best >= hi_best:
        basis.append("the format clues conflict (a mixed or edited log?)")
        lo_best = hi_best = None

    def fmt(t: tuple[int, int, int] | None) -> str | None:
        return None if t is None else ".".join(map(str, t))

    return VersionInfo(
        stated[0] if stated else None,
        stated[2] if stated else None,
        stated[1] if stated else None,
        fmt(lo_best),
        fmt(hi_best),
        tuple(basis),
    )


def _semantics(acc: RunAcc, version: VersionInfo) -> Semantics:
    manual = "kv_manual" in acc.marks
    marks = acc.marks
    vt = version_tuple(version.stated) if version.stated else None
    if vt is not None and vt < (0, 5, 0):
        vt = None  # e.g. '0.1.dev20073+g…': a source build without a release number
    if "cg_enabled" in marks:
        return Semantics(
            True,
            manual,
            f"CUDA-graph util-equivalence hint (line {marks['cg_enabled']}): the "
            "estimate is subtracted from the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1)",
        )
    if "cg_disabled" in marks:
        return Semantics(
            False,
            manual,
            f"CUDA-graph memory profiling disabled (line {marks['cg_disabled']}): "
            "graphs are captured out of the headroom",
        )
    if vt is not None:
        inside = vt >= (0, 21, 0)
        return Semantics(
            inside,
            manual,
            f"stated version {version.stated} {'≥' if inside else '<'} 0.21 "
            "(CUDA-graph estimate subtracted by default since v0.21.0)",
        )
    if "cg_estimate" in marks:
        return Semantics(
            True,
            manual,
            f"CUDA-graph estimate lines (line {marks['cg_estimate']}) without a "
            "version: default-on estimate (v0.21+) assumed",
        )
    lo = version_tuple(version.inferred_min or "")
    if lo is not None and lo >= (0, 21, 0):
        return Semantics(True, manual, f"formats imply vLLM ≥ {version.inferred_min}")
    return Semantics(
        False,
        manual,
        "no CUDA-graph estimate lines and no version ≥ 0.21: graphs come out of the headroom (pre-0.21 accounting)",
    )


def _rank_sort_key(acc: RankAcc) -> tuple[int, tuple[int, ...], str, int]:
    kind = 0 if acc.ident.kind == DRIVER else 1
    return kind, tuple(v for _, v in acc.ident.parallel), acc.ident.label, acc.ident.pid or 0


def _missing_ranks(acc: RunAcc, ranks: list[Rank]) -> Finding | None:
    """Fewer worker ranks than TP × PP: say so (v0.11.1+ print most lines on local rank 0 only)."""
    sizes = [acc.settings.get(k) for k in ("tensor_parallel_size", "pipeline_parallel_size")]
    if sizes[0] is None or not isinstance(sizes[0].value, int):
        return None
    expected = sizes[0].value * (sizes[1].value if sizes[1] is not None and isinstance(sizes[1].value, int) else 1)
    seen = sum(1 for r in ranks if r.rank != "driver" and not r.rank.startswith(("EngineCore", "APIServer")))
    if expected <= 1 or seen >= expected:
        return None
    return Finding(
        "ranks_not_in_log",
        f"the log shows {seen} of {expected} worker ranks: the others are unknown, not zero (vLLM ≥ 0.11.1 "
        "prints weights, available KV and graph capture on local rank 0 only; pasted excerpts may be partial)",
        None,
        "info",
        {"ranks_seen": seen, "ranks_expected": expected},
    )


def finish_run(acc: RunAcc) -> Run:
    engine, engine_also, notes = _engine(acc)
    ranks = []
    for r in sorted(acc.ranks.values(), key=_rank_sort_key):
        _cg_from_hint(r, acc.settings)
        i = r.ident
        ranks.append(
            Rank(
                i.label,
                i.pid,
                i.process,
                i.ip,
                dict(i.parallel),
                dict(r.fields),
                {k: tuple(v) for k, v in r.also.items()},
                r.first_line,
            )
        )
    ranks, indexed = index_ranks(ranks, acc.assigned, acc.settings)
    findings = list(acc.findings) + notes + indexed
    if acc.repeated:
        findings.append(
            Finding(
                "ray_deduplicated_lines",
                f"Ray collapsed {acc.repeated} repeated lines ('[repeated Nx across cluster]'): those workers' "
                "figures are not attributable to a rank",
                None,
                "warning",
                {"repeated": acc.repeated},
            )
        )
    for rk in ranks:
        kv = rk.fields.get("kv_bytes")
        if kv is not None and isinstance(kv.value, int) and kv.value <= 0:
            findings.append(
                Finding(
                    "negative_kv_memory",
                    f"rank {rk.rank} has no memory left for KV cache ({kv.printed}, line {kv.line}): weights, "
                    "activations and runtime already exceed the requested budget",
                    kv.line,
                    "warning",
                    {"rank": rk.rank, "kv_bytes": kv.value},
                )
            )
    if len(acc.engine_printers) > 1:
        names = sorted(acc.engine_printers)
        findings.append(
            Finding(
                "several_engines",
                f"{len(names)} engine processes ({', '.join(names)}) printed KV figures: with data parallelism "
                "each engine has its own KV pool; `engine` holds the smallest",
                None,
                "info",
                {"engines": len(names)},
            )
        )
    missing = _missing_ranks(acc, ranks)
    if missing is not None:
        findings.append(missing)
    if not acc.has_memory:
        findings.append(
            Finding(
                "no_memory_lines_in_run",
                "this engine start printed no memory figures (it may have stopped before profiling)",
                acc.first_line,
                "warning",
            )
        )
    version = _version(acc)
    return Run(
        version.stated,
        version,
        _semantics(acc, version),
        dict(acc.settings),
        dict(acc.args),
        tuple(ranks),
        engine,
        engine_also,
        tuple(findings),
        acc.first_line,
        acc.last_line,
        run_layout(ranks, acc.settings),
    )

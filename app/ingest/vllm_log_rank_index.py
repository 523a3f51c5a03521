"""Which TP/PP rank a worker printed by pid only is: from its own "is assigned as" line.

Ray's workers (`(RayWorkerWrapper pid=N[, ip=A])`, public/62-63) and V0's `(VllmWorkerProcess
pid=N)` carry no index in their prefix, so their ranks were labelled `pid=374 ip=10.254.6.219`.
Each worker prints where it sits once its groups exist (vllm/distributed/parallel_state.py,
`initialize_model_parallel`, since 3e472d882 2025-02-22; @28be48fa9 line 1747):
"rank %s in world size %s is assigned as DP rank %s, PP rank %s, [PCP rank %s, ]TP rank %s[, EP
rank %s[, EPLB rank %s]]". A worker that printed it is labelled by its index (`TP1`, `PP1_TP0`), the
line is its evidence. A worker whose line is not in the log (Ray collapses similar lines of
several workers into one "[repeated Nx across cluster]"; an excerpt may lack it) keeps its process
label and a finding says its index is not stated — never one made up. The one exception is
elimination: when every worker of the world is in the log and all but one state their index, the
last one holds the index left (public/62: TP1 is stated, the other of the two workers is TP0).

A V1 engine of world size 1 runs its only worker inside the EngineCore process (vLLM picks the
"uni" executor for world size 1, vllm/config/parallel.py; ``UniProcExecutor`` builds the worker at
rpc_rank 0 and rank 0, vllm/v1/executor/uniproc_executor.py @28be48fa9), so the worker's rows were
printed under `(EngineCore pid=N)` / `(EngineCore_DP0 pid=N)` and labelled by that process name:
that rank is TP0 (`_in_engine`), by its "is assigned as" line when the log has it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from app.ingest.vllm_log_lines import Fact
from app.ingest.vllm_log_model import Finding, Rank, Stated

NEEDLES = ("is assigned as",)
_ASSIGNED = re.compile(
    r"rank (\d{1,6}) in world size (\d{1,6}) is assigned as DP rank (\d{1,6}), PP rank (\d{1,6}), "
    r"(?:PCP rank \d{1,6}, )?TP rank (\d{1,6})"
)

#: A worker's stated place: (world size, DP, PP, TP), the line and the text printed.
Assignment = tuple[tuple[int, int, int, int], int, str]


def assignment(seg: str) -> list[Fact]:
    """The worker's "rank R in world size W is assigned as …" line (scope "assign")."""
    m = _ASSIGNED.search(seg)
    if m is None:
        return []
    world, dp, pp, tp = (int(m[i]) for i in (2, 3, 4, 5))
    numbers: tuple[tuple[str, int | None], ...] = (("world", world), ("DP", dp), ("PP", pp), ("TP", tp))
    return [Fact("assign", "parallel", int(m[1]), m[0], 0, m.start(), numbers=numbers)]


def fold(assigned: dict[str, Assignment], f: Fact, label: str, line: int) -> None:
    """Keep a worker's first "is assigned as" fact (`assignment`) under its rank label."""
    world, dp, pp, tp = (int(v or 0) for _, v in f.numbers)
    assigned.setdefault(label, ((world, dp, pp, tp), line, f.printed))


def _label(pp: int, tp: int, pp_size: int) -> str:
    return f"PP{pp}_TP{tp}" if pp_size > 1 else f"TP{tp}"


def _size(settings: Mapping[str, Stated], key: str) -> int | None:
    stated = settings.get(key)
    return stated.value if stated is not None and isinstance(stated.value, int) else None


def _order(r: Rank) -> tuple[bool, bool, int, int, int, str]:
    """The driver first, then the indexed workers by DP, PP, TP, then the rest by label."""
    p = r.parallel
    return r.rank != "driver", "TP" not in p, p.get("DP", 0), p.get("PP", 0), p.get("TP", 0), r.rank


def index_ranks(
    ranks: Sequence[Rank], assigned: Mapping[str, Assignment], settings: Mapping[str, Stated]
) -> tuple[list[Rank], list[Finding]]:
    """The ranks with pid-only labels relabelled by their stated (or eliminated) TP/PP index, and
    the findings saying how, or that it is not stated."""
    ranks = _in_engine(ranks, assigned, settings)
    assigned = {k: v for k, v in assigned.items() if not k.startswith("EngineCore")}  # the workers' own
    unindexed = [r for r in ranks if r.rank.startswith("pid=")]
    if not unindexed:
        return list(ranks), []
    if not assigned:
        return list(ranks), [_not_stated(unindexed)]
    pp_size = _size(settings, "pipeline_parallel_size") or max(a[0][2] for a in assigned.values()) + 1
    places: dict[str, tuple[int, int, str]] = {}  # label → (pp, tp, basis)
    for r in unindexed:
        found = assigned.get(r.rank)
        if found is not None:
            (_, _, pp, tp), line, printed = found
            places[r.rank] = (pp, tp, f"stated: '{printed}' (line {line})")
    taken = [(pp, tp) for pp, tp, _ in places.values()]
    if len(set(taken)) != len(taken):
        return list(ranks), []  # two workers claim one index (a restart in the run?): no label is sure
    findings: list[Finding] = []
    left = [r for r in unindexed if r.rank not in places]
    world = {a[0][0] for a in assigned.values()}
    tp_size = _size(settings, "tensor_parallel_size")
    if len(left) == 1 and len(world) == 1 and tp_size is not None and world == {tp_size * pp_size} \
            and len(unindexed) == tp_size * pp_size:
        free = [(p, t) for p in range(pp_size) for t in range(tp_size) if (p, t) not in taken]
        if len(free) == 1:
            others = ", ".join(_label(p, t, pp_size) for p, t in sorted(taken))
            places[left[0].rank] = (*free[0], f"by elimination: the {tp_size * pp_size} workers of the world are in "
                                              f"the log and the others state {others}")
            left = []
    out = []
    for r in ranks:
        place = places.get(r.rank)
        if place is None:
            out.append(r)
            continue
        pp, tp, basis = place
        parallel = {**{k: v for k, v in r.parallel.items() if k == "DP"}, "PP": pp, "TP": tp}
        out.append(replace(r, rank=_label(pp, tp, pp_size), parallel=parallel, index_basis=basis))
    out.sort(key=_order)
    if left:
        findings.append(_not_stated(left))
    return out, findings


def _in_engine(ranks: Sequence[Rank], assigned: Mapping[str, Assignment], settings: Mapping[str, Stated]) -> list[Rank]:
    """The worker rows an EngineCore process printed, relabelled TP0 when the engine's world is one
    process: its own "is assigned as" line says world size 1, or the run states TP 1, PP 1 and no
    data parallelism (a DP group's engines keep their process labels: no worker of theirs is told
    apart here). Only when it is the run's one rank besides the driver / API server."""
    engines = [r for r in ranks if r.rank.startswith("EngineCore")]
    others = [r for r in ranks if r.rank != "driver" and not r.rank.startswith(("EngineCore", "APIServer"))]
    if len(engines) != 1 or others:
        return list(ranks)
    engine = engines[0]
    found = assigned.get(engine.rank)
    if found is not None:
        (world, _, pp, tp), line, printed = found
        if world != 1:
            return list(ranks)
        basis = f"stated: '{printed}' (line {line})"
    else:
        sizes = [_size(settings, k) for k in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")]
        if sizes[0] is None or any(s not in (None, 1) for s in sizes):
            return list(ranks)
        pp, tp = 0, 0
        basis = ("the engine states tensor_parallel_size=1 and pipeline_parallel_size=1: its one worker runs in the "
                 "EngineCore process (vLLM's uni executor for world size 1), as rank 0")  # fmt: skip
    relabelled = replace(engine, rank=_label(pp, tp, 1), parallel={"PP": pp, "TP": tp}, index_basis=basis)
    return [relabelled if r is engine else r for r in ranks]


def _not_stated(left: Sequence[Rank]) -> Finding:
    names = ", ".join(r.rank for r in left)
    ray = any((r.process or "").startswith("RayWorker") for r in left)
    why = ("Ray collapses similar lines of several workers into one '[repeated Nx across cluster]'; " if ray else
           "vLLM prints it since 2025-02-22 (≈v0.7.3); ")
    return Finding(
        "rank_index_not_stated",
        f"the log does not state the TP/PP rank of {names}: their 'is assigned as' line is not in it ({why}an "
        "excerpt may leave it out), so they are labelled by process, not given an index",
        None, "info", {"ranks": len(left)},
    )

"""The per-rank computation as it was before the columns (main at 343ffe7), kept as the oracle the
differential tests hold `app.core.rank_columns` and the column paths of admission, the uniform
budget and the JSON result against: one object per rank, every rank worked out on its own.

Verbatim but for names; not used by the app.
"""

from __future__ import annotations

import statistics
from typing import Any

from app.core.admission import Admission, AdmissionPolicy, RankAdmission, schedulable
from app.core.budget import RankBudget, UniformBudget
from app.core.kv_tiers import kv_tiers
from app.core.kvrank import concurrency as max_concurrency
from app.core.kvspec import RankKV
from app.core.ledger import work_out
from app.core.plan import PlanInput, PlanResult, extra_rows, kv_spec, ledger_rules, warnings
from app.core.plan import _live_with_lookahead as live_with_lookahead
from app.core.prefix_pool import prefix_pool
from app.core.rank_groups import FULL_RANKS_MAX, group_indexes, group_json, histogram, shown_groups, spread
from app.core.report_ranks import _extras_json, rank_json
from app.core.units import fmt_bytes
from app.core.versions import rules_for

JSON = dict[str, Any]


def _rank_blocks(
    kv_by_rank: tuple[tuple[str, int], ...], rkv: RankKV, policy: AdmissionPolicy
) -> list[tuple[str, int, int]]:
    override = policy.num_gpu_blocks_override
    if override is None:
        return [(label, kv, rkv.blocks_for(kv)) for label, kv in kv_by_rank]
    if policy.override_in_check:
        return [(label, override * rkv.page_bytes, override) for label, _ in kv_by_rank]
    return [(label, kv, override) for label, kv in kv_by_rank]


def admit(kv_by_rank: tuple[tuple[str, int], ...], rkv: RankKV, policy: AdmissionPolicy) -> Admission:
    tokens_for = rkv.tokens_for_blocks
    blocks_by_rank = _rank_blocks(kv_by_rank, rkv, policy)
    binding_label: str | None = None
    min_kv = min_blocks = 0
    for label, kv, blocks in blocks_by_rank:
        if binding_label is None or blocks < min_blocks or (blocks == min_blocks and kv < min_kv):
            binding_label, min_kv, min_blocks = label, kv, blocks
    floor_kv = max(0, min_kv)
    ranks = tuple(
        RankAdmission(label, kv, blocks, tokens_for(blocks), rkv.raw_tokens(kv), kv - floor_kv if kv > floor_kv else 0,
                      label == binding_label)
        for label, kv, blocks in blocks_by_rank
    )  # fmt: skip
    tokens = rkv.tokens_for_blocks(min_blocks)
    sched = schedulable(tokens, policy.growth_reserve)
    ceiling = sched // policy.avg_live_tokens if policy.avg_live_tokens else None
    per_req_blocks = rkv.per_request_blocks(policy.max_model_len, policy.max_num_batched_tokens)
    per_req_bytes = per_req_blocks * rkv.page_bytes
    held = 1 if policy.null_block_in_check else 0
    check_kv = max(0, floor_kv - held * rkv.page_bytes)
    fits = per_req_bytes <= check_kv and min_blocks - held >= per_req_blocks
    usable = max(0, min_blocks - 1) if policy.null_block_exists else min_blocks
    conc = max_concurrency(min_blocks, per_req_blocks)
    if not fits:
        limit, concurrency = "max_model_len", 0
    elif ceiling is None:
        limit, concurrency = "max_num_seqs", policy.max_num_seqs
    elif ceiling <= policy.max_num_seqs:
        limit, concurrency = "kv_blocks", ceiling
    else:
        limit, concurrency = "max_num_seqs", policy.max_num_seqs
    return Admission(
        ranks=ranks, binding_rank=binding_label, binding_reason=_reason(ranks, binding_label, min_blocks),
        blocks=min_blocks, tokens=tokens, raw_tokens=rkv.raw_tokens(min_kv), schedulable_tokens=sched,
        concurrency_ceiling=ceiling, concurrency=concurrency, binding_limit=limit,
        max_concurrency_at_max_model_len=conc,
        vllm_kv_cache_size_tokens=int(conc * policy.max_model_len) if policy.kv_size_is_derived else tokens,
        per_request_blocks=per_req_blocks, per_request_bytes=per_req_bytes, fits_max_model_len=fits,
        largest_max_model_len=rkv.largest_max_model_len(check_kv, policy.max_num_batched_tokens),
        stranded_bytes=sum(r.stranded_bytes for r in ranks), usable_blocks=usable,
        servable_max_model_len=fits and per_req_blocks <= usable, null_block_in_check=policy.null_block_in_check,
    )  # fmt: skip


def _reason(ranks: tuple[RankAdmission, ...], label: str | None, min_blocks: int) -> str:
    if label is None:
        return "no ranks"
    if len(ranks) == 1:
        return f"rank {label} is the only rank: {min_blocks:,} blocks"
    others = [r.blocks for r in ranks if r.label != label]
    if all(b == min_blocks for b in others):
        return f"all ranks have {min_blocks:,} blocks; rank {label} is the first with the fewest"
    return (
        f"rank {label} has the fewest blocks ({min_blocks:,}); vLLM gives every worker the minimum, "
        f"the next smallest rank has {min(b for b in others):,}"
    )


def uniform_budget(rooms: tuple[tuple[str, int], ...], reserve_bytes: int, rkv: RankKV) -> UniformBudget | None:
    if not rooms:
        return None
    safes = [(label, room, room - reserve_bytes) for label, room in rooms]
    binding_label, _, min_safe = min(safes, key=lambda s: s[2])
    page = rkv.page_bytes
    uniform = max(0, min_safe) // page * page if page > 0 else max(0, min_safe)
    blocks = rkv.blocks_for(uniform)
    ranks = tuple(RankBudget(label, room, safe, safe - uniform if safe > uniform else 0) for label, room, safe in safes)
    values = [s for _, _, s in safes]
    median = statistics.median(values)
    return UniformBudget(
        kv_cache_memory_bytes=uniform, blocks=blocks, tokens=rkv.tokens_for_blocks(blocks),
        stranded_bytes=sum(r.stranded_bytes for r in ranks), min_bytes=min(values), median_bytes=int(median),
        max_bytes=max(values), min_over_median=(min(values) / median) if median > 0 else None,
        binding_rank=binding_label, ranks=ranks, flag=f"--kv-cache-memory-bytes {uniform}",
    )  # fmt: skip


def compute(plan: PlanInput) -> PlanResult:
    """`plan.compute` with one object per rank (ledger.work_out, the admit and budget above)."""
    rules = rules_for(plan.vllm_version)
    rkv = kv_spec(plan)
    ranks, extras = extra_rows(plan, rules)
    ledgers = work_out(ranks, ledger_rules(plan, rules))
    policy = AdmissionPolicy(
        max_model_len=plan.engine.max_model_len, max_num_batched_tokens=plan.engine.max_num_batched_tokens,
        max_num_seqs=plan.engine.max_num_seqs, growth_reserve=plan.policy.growth_reserve,
        avg_live_tokens=live_with_lookahead(plan), kv_size_is_derived=rules.kv_size_is_derived,
        null_block_in_check=rules.null_block_in_check, null_block_exists=rules.null_block_exists,
        num_gpu_blocks_override=plan.engine.num_gpu_blocks_override, override_in_check=rules.override_in_check,
    )  # fmt: skip
    admission = admit(tuple((lg.label, lg.kv.bytes) for lg in ledgers), rkv, policy)
    rooms = tuple((lg.label, lg.kv.bytes) for lg in ledgers if lg.kv.source != "default")
    if plan.engine.kv_cache_memory_bytes is not None and ledgers and all(lg.inp.kv_room for lg in ledgers):
        # under a manual budget the ledger's KV is the manual value: price the measured rooms
        rooms = tuple((lg.label, lg.inp.kv_room.bytes) for lg in ledgers if lg.inp.kv_room is not None)
    budget = uniform_budget(rooms, plan.policy.operating_reserve_bytes, rkv)
    layout, engine = plan.layout, plan.engine
    link = plan.node.host_link if plan.node is not None else "pcie"
    tiers = kv_tiers(rkv, admission.blocks, layout.tp * layout.pp, engine.kv_offload, link)
    prefix = prefix_pool(engine.enable_prefix_caching, admission.blocks, rules.null_block_exists, rkv.block_size,
                         admission.concurrency, plan.policy.avg_live_tokens)  # fmt: skip
    result = PlanResult(plan, rules, rkv, ledgers, admission, budget, (), extras, tiers, prefix)
    return PlanResult(plan, rules, rkv, ledgers, admission, budget, warnings(result), extras, tiers, prefix)


def _val(cell: Any) -> int | None:
    return None if cell is None else int(cell.bytes)


def ranks_json(result: PlanResult) -> JSON:
    """The JSON result's per-rank part, one dict per rank (report.ranks_json before the columns)."""
    ledgers, adm = result.ledgers, result.admission
    ras = adm.ranks
    binding = next((i for i, lg in enumerate(ledgers) if lg.label == adm.binding_rank), None)
    kvs = [lg.kv.bytes for lg in ledgers]
    out: JSON = {
        "rank_distribution": {
            "ranks": len(ledgers), "kv_bytes": spread(kvs), "kv_bytes_histogram": histogram(kvs),
            "free_at_start_bytes": spread([_val(lg.inp.free_at_start) for lg in ledgers]),
            "total_bytes": spread([_val(lg.inp.total) for lg in ledgers]),
            "binding_rank": adm.binding_rank, "binding_index": binding,
            "representative_indexes": representatives(kvs, binding) if len(ledgers) <= FULL_RANKS_MAX else None,
        },
        "binding_index": binding,
    }  # fmt: skip
    if len(ledgers) <= FULL_RANKS_MAX:
        out["ranks"] = [
            rank_json(lg, ra.blocks, ra.tokens, ra.raw_tokens, ra.stranded_bytes, ra.binding, i)
            | _extras_json(result, i)
            for i, (lg, ra) in enumerate(zip(ledgers, ras, strict=True))
        ]
        return {**out, "ranks_form": "full", "rank_groups": None, "rank_groups_omitted": 0}
    keys = [
        (lg.inp.total, lg.inp.free_at_start, lg.inp.weights, lg.inp.non_torch, lg.inp.cuda_graphs,
         lg.inp.activation, lg.inp.kv_room, lg.inp.lora, lg.inp.speculative, lg.kv, lg.requested_bytes,
         lg.will_start, ra.blocks, ra.raw_tokens)
        for lg, ra in zip(ledgers, ras, strict=True)
    ]  # fmt: skip
    groups = group_indexes(keys, binding)
    shown = shown_groups(groups, lambda i: ledgers[i].kv.bytes)
    out["ranks"] = [
        rank_json(ledgers[i], ras[i].blocks, ras[i].tokens, ras[i].raw_tokens, ras[i].stranded_bytes, ras[i].binding, i)
        | _extras_json(result, i)
        for i, _ in shown
    ]
    out["rank_groups"] = [group_json(members, j) for j, (_, members) in enumerate(shown)]
    out["rank_groups_omitted"] = len(groups) - len(shown)
    return {**out, "ranks_form": "grouped"}


def representatives(kvs: list[int], binding: int | None) -> list[int]:
    """app.web.plan.charts.representative_ranks (at 8855274) on positions: the binding rank (else the
    first by KV), the median-KV and the largest-KV rank by a stable sort, distinct, in that order."""
    if not kvs:
        return []
    by_kv = sorted(range(len(kvs)), key=lambda i: float(kvs[i]))
    picks: list[int] = []
    for i in (by_kv[0] if binding is None else binding, by_kv[len(by_kv) // 2], by_kv[-1]):
        if all(i != p for p in picks):
            picks.append(i)
    return picks


def spread_warnings(result: PlanResult) -> list[tuple[str, str, str | None]]:
    """app.core.plan._spread_warnings's rank outliers at 8855274: every rank tested against the median."""
    kvs = [lg.kv.bytes for lg in result.ledgers]
    out: list[tuple[str, str, str | None]] = []
    if len(kvs) >= 3:
        median = statistics.median(kvs)
        for lg, kv in zip(result.ledgers, kvs, strict=True):
            if median > 0 and abs(kv - median) > 0.1 * median:
                out.append(("rank_outlier", f"rank {lg.label} has {fmt_bytes(kv)} of KV, far from the median "
                            f"{fmt_bytes(int(median))}", lg.label))  # fmt: skip
    return out


def budget_ranks(budget: UniformBudget, labels: set[str] | None) -> list[JSON]:
    return [
        {"rank": r.label, "room_bytes": r.room_bytes, "safe_bytes": r.safe_bytes, "stranded_bytes": r.stranded_bytes}
        for r in budget.ranks
        if labels is None or r.label in labels
    ]

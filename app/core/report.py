"""The JSON result of a plan (the contract `kvledger plan --json`, the API and the pages share),
and the explain-the-math entries: every headline number with its formula and plugged-in values.
"""

from __future__ import annotations

from typing import Any

from app import __version__
from app.core.budget import UniformBudget
from app.core.dp_layout import dp_layout_of
from app.core.explain import explain
from app.core.kv_tiers import KVOffload, offload_env
from app.core.ledger import Cell, RankLedger
from app.core.lora import LoraSpec
from app.core.plan import PlanResult, draft_kv_bpt, encoder_cache_of
from app.core.prefix_pool import PrefixPool
from app.core.rank_groups import FULL_RANKS_MAX, group_indexes, group_json, histogram, shown_groups, spread
from app.core.vllm_flags import flag_strings, plan_flags, uniform_budget_flag
from app.core.warning_groups import group_warnings
from app.core.whatif import utilization_notes

JSON = dict[str, Any]


def _val(cell: Cell | None) -> int | None:
    return None if cell is None else cell.bytes


def rank_json(
    lg: RankLedger, blocks: int, tokens: int, raw: int | None, stranded: int, binding: bool, index: int = 0
) -> JSON:
    """One rank's JSON: every ledger row in bytes (None when unknown) and where each came from.

    ``index`` is the rank's integer position in the plan's ``ranks`` list; ``label`` and ``rank``
    are its name (a log's worker label such as "TP3" or "PP1_TP0", else the position as text).

    Reads the ledger's cells directly (no intermediate Cell objects for requested and headroom):
    this runs for every rank of every plan.
    """
    inp = lg.inp
    total, requested, derived_source = inp.total, lg.requested_bytes, lg.budget_source
    out: JSON = {"rank": inp.label}
    sources: dict[str, str] = {}
    for key, cell in (("total_bytes", total), ("free_at_start_bytes", inp.free_at_start)):
        out[key] = None if cell is None else cell.bytes
        if cell is not None:
            sources[key] = cell.source
    if derived_source is None or total is None or requested is None:
        out["requested_bytes"] = out["headroom_bytes"] = None
    else:
        out["requested_bytes"], out["headroom_bytes"] = requested, total.bytes - requested
        sources["requested_bytes"] = sources["headroom_bytes"] = derived_source
    for key, cell in (
        ("weights_bytes", inp.weights), ("non_torch_bytes", inp.non_torch), ("cuda_graph_bytes", inp.cuda_graphs),
        ("activation_bytes", inp.activation), ("kv_bytes", lg.kv),
        ("lora_row_bytes", inp.lora), ("speculative_row_bytes", inp.speculative),
    ):
        out[key] = None if cell is None else cell.bytes
        if cell is not None:
            sources[key] = cell.source
    out.update(
        index=index,
        label=inp.label,
        blocks=blocks,
        tokens=tokens,
        raw_tokens=raw,
        stranded_bytes=stranded,
        will_start=lg.will_start,
        binding=binding,
        sources=sources,
    )
    return out


def _extras_json(result: PlanResult, index: int) -> JSON:
    """The rank's LoRA / draft estimates (issue 15's contract keys), None when the feature is off.

    ``lora_bytes``: the adapter slots vLLM preallocates on this rank (app.core.lora), whatever the
    ledger rows hold; ``lora_row_bytes`` is what the ``lora`` row subtracts (0 of the slots when the
    weights are measured: "Model loading took" includes them)."""
    extra = result.extras[index] if index < len(result.extras) else None
    return {
        "lora_bytes": extra.lora_bytes if extra else None,
        "lora_profile_bytes": extra.lora_profile_bytes if extra else None,
        "speculative_bytes": extra.speculative_bytes if extra else None,
    }


def budget_json(budget: UniformBudget | None, result: PlanResult, labels: set[str] | None = None) -> JSON | None:
    """The uniform budget; `labels`: list only these ranks (the grouped form's representatives)."""
    if budget is None:
        return None
    engine = result.plan.engine
    conc = result.rkv.max_concurrency(budget.blocks, engine.max_model_len, engine.max_num_batched_tokens)
    deployed, why = uniform_budget_flag(result)
    return {
        "in_flags": deployed is not None,
        "in_flags_reason": why,
        "kv_cache_memory_bytes": budget.kv_cache_memory_bytes,
        "blocks": budget.blocks,
        "tokens": budget.tokens,
        "stranded_bytes": budget.stranded_bytes,
        "min_bytes": budget.min_bytes,
        "median_bytes": budget.median_bytes,
        "max_bytes": budget.max_bytes,
        "min_over_median": budget.min_over_median,
        "binding_rank": budget.binding_rank,
        "concurrency_at_max_model_len": int(conc),
        "flag": budget.flag,
        "ranks": [
            {
                "rank": r.label,
                "room_bytes": r.room_bytes,
                "safe_bytes": r.safe_bytes,
                "stranded_bytes": r.stranded_bytes,
            }
            for r in budget.ranks
            if labels is None or r.label in labels
        ],
    }


def ranks_json(result: PlanResult) -> JSON:
    """`ranks` in full (up to FULL_RANKS_MAX ranks) or grouped (`app.core.rank_groups`), with
    `ranks_form`, `rank_groups`, `rank_groups_omitted`, `rank_distribution` and `binding_index`."""
    ledgers, adm = result.ledgers, result.admission
    ras = adm.ranks  # admit() keeps the ledgers' order
    binding = next((i for i, lg in enumerate(ledgers) if lg.label == adm.binding_rank), None)
    kvs = [lg.kv.bytes for lg in ledgers]
    out: JSON = {
        "rank_distribution": {
            "ranks": len(ledgers),
            "kv_bytes": spread(kvs),
            "kv_bytes_histogram": histogram(kvs),
            "free_at_start_bytes": spread([_val(lg.inp.free_at_start) for lg in ledgers]),
            "total_bytes": spread([_val(lg.inp.total) for lg in ledgers]),
            "binding_rank": adm.binding_rank,
            "binding_index": binding,
        },
        "binding_index": binding,
    }
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
    ]  # fmt: skip  (tokens and stranded bytes follow from blocks and KV)
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


def _lora_json(spec: LoraSpec | None) -> JSON | None:
    if spec is None:
        return None
    return {
        "max_loras": spec.max_loras,
        "max_lora_rank": spec.max_lora_rank,
        "max_cpu_loras": spec.max_cpu_loras,
        "target_modules": list(spec.target_modules) if spec.target_modules is not None else None,
    }


def _encoder_cache_json(result: PlanResult) -> JSON | None:
    """The encoder cache vLLM budgets for a vision model (app.core.encoder_cache); None otherwise."""
    terms = encoder_cache_of(result)
    if terms is None:
        return None
    return {
        "max_tokens_per_item": terms.max_tokens_per_item,
        "encoder_compute_budget_tokens": terms.compute_budget_tokens,
        "encoder_cache_size_tokens": terms.cache_size_tokens,
        "items_profiled": terms.items_profiled,
        "cache_bytes": terms.cache_bytes,
        "encoder_peak_bytes": terms.encoder_peak_bytes,
        "in_row": "activation",  # the profile peak holds it; no separate allocation
        "note": terms.note,
    }


def _spec_json(result: PlanResult) -> JSON | None:
    spec = result.plan.engine.speculative
    if spec is None:
        return None
    return {
        "method": spec.method,
        "model": spec.draft_name,
        "num_speculative_tokens": spec.num_speculative_tokens,
        "lookahead_tokens_per_request": spec.lookahead_tokens,
    }


def offload_json(offload: KVOffload | None) -> JSON | None:
    if offload is None:
        return None
    return {"backend": offload.backend, "cpu_bytes": offload.cpu_bytes, "disk_bytes": offload.disk_bytes,
            "chunk_size": offload.chunk_size}


def tiers_json(result: PlanResult) -> list[JSON]:
    """The GPU tier first, then the offload tiers (issue 15's `kv_tiers`: name, bytes, tokens)."""
    return [{"name": t.name, "bytes": t.bytes, "tokens": t.tokens, "bytes_per_rank": t.bytes_per_rank,
             "unit_tokens": t.unit_tokens, "bandwidth_bytes_per_s": t.bandwidth_bytes_per_s} for t in result.tiers]


def prefix_json(pool: PrefixPool | None) -> JSON | None:
    if pool is None:
        return None
    share = pool.retention_share
    return {"enable_prefix_caching": pool.enable_prefix_caching, "usable_blocks": pool.usable_blocks,
            "concurrency": pool.concurrency, "blocks_per_request": pool.blocks_per_request,
            "running_blocks": pool.running_blocks, "retained_blocks": pool.retained_blocks,
            "idle_blocks": pool.idle_blocks, "retention_share": None if share is None else round(share, 4)}


def dp_json(result: PlanResult) -> JSON:
    """The DP/EP layout (app.core.dp_layout): per-engine figures and what the DP group adds up to."""
    lay, adm = dp_layout_of(result), result.admission
    return {
        "dp": lay.dp, "tp": lay.tp, "pp": lay.pp, "enable_expert_parallel": lay.enable_expert_parallel,
        "use_ep": lay.use_ep, "ep_size": lay.ep_size, "moe_tp_size": lay.moe_tp_size, "num_experts": lay.num_experts,
        "experts_per_rank_max": lay.experts_on(0), "experts_per_rank_min": lay.experts_on(lay.ep_size - 1),
        "engines": lay.dp, "gpus": lay.gpus,
        "concurrency_per_engine": adm.concurrency,
        "concurrency_all_engines": None if adm.concurrency is None else adm.concurrency * lay.dp,
        "schedulable_tokens_all_engines": adm.schedulable_tokens * lay.dp,
    }


def flags(result: PlanResult) -> list[str]:
    """The vLLM command-line flags that deploy this plan (from the one mapping in app.core.vllm_flags)."""
    return flag_strings(plan_flags(result))


def result_to_dict(result: PlanResult, levers: list[JSON] | None = None) -> JSON:
    """The JSON result; keys are a contract other tools read."""
    adm, rkv, plan = result.admission, result.rkv, result.plan
    ranks = ranks_json(result)
    grouped = ranks["ranks_form"] == "grouped"
    shape = plan.model.shape
    return {
        "core_version": __version__,
        "vllm_version": result.rules.label,
        # vLLM >= 0.21 sizes KV after subtracting the CUDA-graph estimate (inside the budget);
        # before, graphs are captured after the KV cache is allocated, in the headroom (versions.py).
        "cuda_graphs_in_budget": result.rules.cuda_graphs_in_budget,
        "model": {
            "name": plan.model.name or (shape.name if shape else None),
            "source": plan.model.source,
            "config_sha256": plan.model.sha256,
            "layers": shape.num_layers if shape else None,
            "kv_heads": shape.num_kv_heads if shape else None,
            "head_dim": shape.head_dim if shape else None,
            "dtype": shape.dtype if shape else None,
            "quantization": (shape.online_quantization or shape.quantization) if shape else None,
            "checkpoint_quantization": shape.quantization if shape else None,
            "weight_bytes": shape.weight_bytes if shape else None,
        },
        "layout": {
            "tp": plan.layout.tp,
            "pp": plan.layout.pp,
            "dp": plan.layout.dp,
            "dcp": plan.layout.dcp,
            "enable_expert_parallel": plan.layout.expert_parallel,
            "ranks": len(plan.ranks),
        },
        "engine": {
            "gpu_memory_utilization": plan.engine.gpu_memory_utilization,
            "kv_cache_memory_bytes": plan.engine.kv_cache_memory_bytes,
            "kv_cache_dtype": plan.engine.kv_cache_dtype,
            "block_size": plan.engine.block_size,
            "max_model_len": plan.engine.max_model_len,
            "max_num_batched_tokens": plan.engine.max_num_batched_tokens,
            "max_num_seqs": plan.engine.max_num_seqs,
            "enforce_eager": plan.engine.enforce_eager,
            "quantization": plan.engine.quantization,
            "num_gpu_blocks_override": plan.engine.num_gpu_blocks_override,
            "disable_hybrid_kv_cache_manager": plan.engine.disable_hybrid_kv_cache_manager,
            "lora": _lora_json(plan.engine.lora),
            "speculative": _spec_json(result),
            "kv_offload": offload_json(plan.engine.kv_offload),
            "enable_prefix_caching": plan.engine.enable_prefix_caching,
            "async_scheduling": plan.engine.async_scheduling,  # None: the version's default
        },
        "node": None if plan.node is None else {
            "host_memory_bytes": plan.node.host_memory_bytes, "gpus_per_node": plan.node.gpus_per_node,
            "host_link": plan.node.host_link,
        },
        "policy": {
            "growth_reserve": plan.policy.growth_reserve,
            "operating_reserve_bytes": plan.policy.operating_reserve_bytes,
            "avg_live_tokens": plan.policy.avg_live_tokens,
        },
        "kv_bytes_per_token": rkv.kv_bytes_per_token,
        # issue 15: the draft's share of kv_bytes_per_token (its layers sit in the same block pool)
        "draft_kv_bytes_per_token": draft_kv_bpt(plan, rkv) if plan.engine.speculative is not None else None,
        "encoder_cache": _encoder_cache_json(result),
        "kv_heads_per_rank": rkv.kv_heads_per_rank,
        "in_flight_batches": rkv.in_flight_batches,  # sliding-window groups: batches held beside the window
        "layers_on_rank": rkv.layers_on_rank,
        "page_bytes": rkv.page_bytes,
        "block_size": rkv.block_size,
        "per_request_bytes": adm.per_request_bytes,
        "per_request_blocks": adm.per_request_blocks,
        **ranks,
        "binding_rank": adm.binding_rank,
        "binding_reason": adm.binding_reason,
        "blocks": adm.blocks,
        "tokens": adm.tokens,
        "raw_tokens": adm.raw_tokens,
        "schedulable_tokens": adm.schedulable_tokens,
        "concurrency_ceiling": adm.concurrency_ceiling,
        "concurrency": adm.concurrency,
        "binding_limit": adm.binding_limit,
        "max_num_seqs": plan.engine.max_num_seqs,
        "max_concurrency_at_max_model_len": round(adm.max_concurrency_at_max_model_len, 4),
        "vllm_kv_cache_size_tokens": adm.vllm_kv_cache_size_tokens,
        "fits_max_model_len": adm.fits_max_model_len,
        # vLLM's null block (one block is never handed out): a max_model_len request is schedulable
        "servable_max_model_len": adm.servable_max_model_len,
        "largest_max_model_len": adm.largest_max_model_len,
        "stranded_bytes": adm.stranded_bytes,
        "will_start": all(lg.will_start for lg in result.ledgers) and adm.fits_max_model_len,
        "uniform_budget": budget_json(result.budget, result, {r["rank"] for r in ranks["ranks"]} if grouped else None),
        "kv_tiers": tiers_json(result),
        "kv_offload_env": offload_env(plan.engine.kv_offload, plan.layout.tp * plan.layout.pp, result.rules.version),
        "prefix_pool": prefix_json(result.prefix),
        "dp_layout": dp_json(result),
        "flags": flags(result),
        "vllm_args": [{"flag": flag, "value": value} for flag, value in plan_flags(result)],
        **warnings_json(result, MAX_WARNINGS if grouped else None),
        "explain": explain(result),
        "levers": levers if levers is not None else [],
        "notes": [*plan.notes, *rkv.notes, *utilization_notes(plan)],
    }


#: Warnings listed one by one in the grouped form (their groups always cover every rank).
MAX_WARNINGS = 256


def warnings_json(result: PlanResult, limit: int | None = None) -> JSON:
    """`warnings` (one per rank and finding; the first `limit` of them, `warnings_omitted` counts
    the rest) and `warning_groups`, one entry per message repeated across ranks ("ranks TP0–TP7: …")."""
    every = [{"code": w.code, "message": w.message, "rank": w.rank} for w in result.warnings]
    shown = every if limit is None else every[:limit]
    return {"warnings": shown, "warnings_omitted": len(every) - len(shown), "warning_groups": group_warnings(every)}

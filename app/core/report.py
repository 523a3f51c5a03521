"""The JSON result of a plan (the contract `kvledger plan --json`, the API and the pages share),
and the explain-the-math entries: every headline number with its formula and plugged-in values.
"""

from __future__ import annotations

from typing import Any

from app import __version__
from app.core.dp_layout import dp_layout_of
from app.core.explain import explain
from app.core.kv_tiers import KVOffload, offload_env
from app.core.lora import LoraSpec
from app.core.plan import PlanInput, PlanResult, draft_kv_bpt, encoder_cache_of
from app.core.prefix_pool import PrefixPool
from app.core.rank_columns import all_start
from app.core.report_ranks import budget_json, ranks_json
from app.core.vllm_flags import flag_strings, plan_flags
from app.core.warning_groups import group_warnings
from app.core.whatif import utilization_notes

JSON = dict[str, Any]


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


def quantization_json(plan: PlanInput) -> JSON:
    """The model's quantization: as loaded (`--quantization fp8` online included) and the
    checkpoint's. The checkpoint's is what the run's log states when it states one
    (`model.quantization`: vLLM's resolved `quantization=` of the engine config line, or the linear
    method of a "Using <Kernel> for <Method>" line), else the config.json's `quantization_config`;
    `checkpoint_quantization_source` says which, and a config.json that says otherwise is shown
    beside it (`config_quantization`). Before, an import of a compressed-tensors run with the bf16
    catalogue model said `checkpoint_quantization: null`, the config's, against its own log."""
    shape = plan.model.shape
    config = shape.quantization if shape else None
    stated = plan.model.stated_quantization
    if stated is not None and stated == plan.engine.quantization and config is None:
        stated = None  # `--quantization fp8` on the run: the log's method is the online one, not the checkpoint's
    checkpoint = stated or config
    out: JSON = {
        "quantization": (shape.online_quantization if shape else None) or checkpoint,
        "checkpoint_quantization": checkpoint,
        "checkpoint_quantization_source": "log" if stated else "config" if config else None,
    }
    if stated is not None and config is not None and config != stated:
        out["config_quantization"] = config
    return out


def result_to_dict(result: PlanResult, levers: list[JSON] | None = None, lazy: bool = False) -> JSON:
    """The JSON result; keys are a contract other tools read. `lazy`: its per-rank lists are
    `JsonRows` (rows made when read; `json_rows.plain_result` gives plain JSON)."""
    adm, rkv, plan = result.admission, result.rkv, result.plan
    ranks = ranks_json(result, lazy)
    grouped = ranks["ranks_form"] == "grouped"
    pairs = plan_flags(result)  # `flags` and `vllm_args`: one list of (flag, value) pairs
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
            **quantization_json(plan),
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
            "cudagraph_mode": plan.engine.cudagraph_mode,
            "estimate_cudagraphs": plan.engine.estimate_cudagraphs,  # None: the version's default (versions.py)
            "mla_disable": plan.engine.mla_disable,  # VLLM_MLA_DISABLE=1 (app.core.mla_rules)
            "flashinfer_sampler": plan.engine.flashinfer_sampler,  # None: the default (flashinfer_sampler_in_use)
            "allow_long_max_model_len": plan.engine.allow_long_max_model_len,  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
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
        "will_start": all_start(result.ledgers) and adm.fits_max_model_len,
        "uniform_budget": budget_json(
            result.budget, result, {r["rank"] for r in ranks["ranks"]} if grouped else None, lazy
        ),
        "kv_tiers": tiers_json(result),
        "kv_offload_env": offload_env(plan.engine.kv_offload, plan.layout.tp * plan.layout.pp, result.rules.version),
        "prefix_pool": prefix_json(result.prefix),
        "dp_layout": dp_json(result),
        "flags": flag_strings(pairs),
        "vllm_args": [{"flag": flag, "value": value} for flag, value in pairs],
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

"""Explain entries of the KV offload tiers, the DP/EP layout and the prefix-caching pool split (issue 15
items 4, 5, 6).

Same contract as ``app.core.explain``: ``values`` is arithmetic over the printed numbers that
evaluates to ``result`` (tests/core/test_explain_identities.py evaluates every entry).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.plan import PlanResult

JSON = dict[str, Any]


def tier_entries(result: PlanResult) -> JSON:
    """One entry per offload tier: its tokens from its size (app.core.kv_tiers)."""
    offload, rkv, layout = result.plan.engine.kv_offload, result.rkv, result.plan.layout
    if offload is None or len(result.tiers) < 2:
        return {}
    workers = layout.tp * layout.pp
    block = rkv.page_bytes_per_layer * rkv.group_size
    out: JSON = {}
    for tier in result.tiers[1:]:
        size = offload.cpu_bytes if tier.name == "cpu" else (offload.disk_bytes or 0)
        if offload.backend == "native":
            groups = f" // {rkv.n_groups}" if rkv.n_groups > 1 else ""
            dcp = f" × {rkv.dcp}" if rkv.dcp > 1 else ""
            formula = ("kv_offloading_size // (GPU block bytes per worker × TP × PP workers)"
                       f"{' // kv_cache_groups' if groups else ''} × block_size — CPUOffloadingSpec "
                       "(vllm/v1/kv_offload/cpu/spec.py): the size is the engine's total over its workers")
            values = f"{size:,} // ({block:,} × {workers}){groups} × {rkv.block_size}{dcp}"
        else:
            formula = (f"(size / TP × PP workers) // (chunk_size × bytes per token) × chunk_size — vLLM gives "
                       f"LMCache size / (tp × pp) per rank (vllm/config/vllm.py _post_init_kv_transfer_config); "
                       f"LMCache stores whole chunks ({tier.name} tier)")
            values = (f"{size:,} // {workers} // ({offload.chunk_size} × {rkv.kv_bytes_per_token:,})"
                      f" × {offload.chunk_size}")
        out[f"kv_tiers.{tier.name}.tokens"] = {
            "formula": formula, "values": values, "result": f"{tier.tokens:,}", "inputs": "derived",
        }
    return out


def prefix_entries(result: PlanResult) -> JSON:
    """The pool split at the planned load (app.core.prefix_pool)."""
    pool = result.prefix
    if pool is None or pool.running_blocks is None or pool.retained_blocks is None or pool.usable_blocks <= 0:
        return {}
    assert pool.concurrency is not None and pool.blocks_per_request is not None
    running = f"{pool.concurrency:,} × {pool.blocks_per_request:,}"
    out: JSON = {
        "prefix_pool.running_blocks": {
            "formula": "min(usable blocks, concurrency × cdiv(avg_live_tokens, block_size))",
            "values": _min(pool.usable_blocks, running),
            "result": f"{pool.running_blocks:,}",
            "inputs": "derived",
        }
    }
    if pool.enable_prefix_caching:
        out["prefix_pool.retained_blocks"] = {
            "formula": "usable blocks − running blocks: freed blocks keep their hash in vLLM's free queue "
            "(BlockPool, vllm/v1/core/block_pool.py) until they are handed out again",
            "values": f"{pool.usable_blocks:,} − {pool.running_blocks:,}",
            "result": f"{pool.retained_blocks:,}",
            "inputs": "derived",
        }
    else:
        out["prefix_pool.retained_blocks"] = {
            "formula": "0: with prefix caching off a freed block keeps no hash (--no-enable-prefix-caching)",
            "values": "0", "result": "0", "inputs": "derived",
        }
    return out


def dp_entries(result: PlanResult) -> JSON:
    """EP size and experts per rank (app.core.dp_layout, FusedMoEParallelConfig.make), and the DP group's
    concurrency (engines add up)."""
    from app.core.dp_layout import dp_layout_of

    lay, adm = dp_layout_of(result), result.admission
    out: JSON = {}
    if lay.use_ep and lay.num_experts:
        out["dp_layout.ep_size"] = {
            "formula": "dp × tp: with --enable-expert-parallel the experts' TP group, flattened across DP, becomes "
            "the EP group (FusedMoEParallelConfig.make, vllm/model_executor/layers/fused_moe/config.py)",
            "values": f"{lay.dp} × {lay.tp}", "result": f"{lay.ep_size}", "inputs": "derived",
        }
        out["dp_layout.experts_per_rank_max"] = {
            "formula": "ceil(num_experts / ep_size): E // ep on every EP rank, one more on the first E % ep "
            "(determine_expert_map, fused_moe/expert_map_manager.py)",
            "values": f"({lay.num_experts} + {lay.ep_size} − 1) // {lay.ep_size}",
            "result": f"{lay.experts_on(0)}", "inputs": "derived",
        }
    if lay.dp > 1 and adm.concurrency is not None:
        out["dp_layout.concurrency_all_engines"] = {
            "formula": "concurrency per engine × dp: each DP rank is an engine with its own block pool",
            "values": f"{adm.concurrency:,} × {lay.dp}", "result": f"{adm.concurrency * lay.dp:,}",
            "inputs": "derived",
        }
    return out


def _min(usable: int, running: str) -> str:
    """``min(a, b)`` written with ``max`` (the identity evaluator's functions): ``a − max(0, a − b)``."""
    return f"{usable:,} − max(0, {usable:,} − {running})"

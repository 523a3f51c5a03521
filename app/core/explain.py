"""Explain the math: every headline number as vLLM's rule, the numbers plugged in, and the result.

Each entry's ``values`` is an arithmetic expression over the printed numbers (``×``, ``−``,
``//`` for floor division, ``/`` true division, ``floor``/``ceil``/``int``/``max``) that evaluates
to ``result`` — byte figures within their printed rounding, counts exactly (a property test
evaluates every entry). The rules are vLLM's (V1, ``vllm/v1/core/kv_cache_utils.py``):

- ``get_num_blocks``: ``num_blocks = available // page_size // num_layers`` where ``num_layers`` is
  the layers per KV-cache group (the pool tensors are shared, one layer of every group each);
- ``_report_kv_cache_config`` (v0.9.1 … 2026-04, e.g. @fa7e254a7 line 1080): the logged
  "GPU KV cache size" is ``num_blocks // len(kv_cache_groups) × min_block_size`` (× dcp) — the block
  pool is split among the groups (attention, Mamba/GDN, sliding window) *before* multiplying by the
  block size; since 2026-04-28 (PR #41069) it is ``int(max_concurrency × max_model_len)``;
- ``get_max_concurrency_for_kv_cache_config``: ``num_blocks / cdiv(Σ_groups max_memory_usage, page)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.core.explain_tiers import dp_entries, prefix_entries, tier_entries
from app.core.kvrank import RankKV
from app.core.layers import ATTENTION_KINDS
from app.core.ledger import ROOM_FROM_BLOCKS, Cell, RankLedger
from app.core.rank_columns import index_of
from app.core.units import decimal_ratio, fmt_bytes

if TYPE_CHECKING:
    from app.core.plan import PlanResult

JSON = dict[str, Any]
_RULES = "vllm/v1/core/kv_cache_utils.py"


def _val(cell: Cell | None) -> int | None:
    return None if cell is None else cell.bytes


def _inputs(*cells: Cell | None) -> str:
    sources = {c.source for c in cells if c is not None}
    if sources <= {"measured"}:
        return "measured"
    if sources <= {"estimated", "default"}:
        return "estimated"
    return "mixed"


def attention_layers(rkv: RankKV) -> int:
    """Attention layers of the rank (the layers whose pages grow with tokens)."""
    return sum(g.num_layers for g in rkv.groups if g.kind in ATTENTION_KINDS)


_KIND_WORDS = {
    "full": "full-attention", "sliding": "sliding-window", "chunked": "chunked-local", "mla": "MLA",
    "mamba": "Mamba", "linear": "gated-DeltaNet",
}  # fmt: skip


def _group_words(rkv: RankKV) -> str:
    kinds: dict[str, int] = {}
    for g in rkv.groups:
        kinds[g.kind] = kinds.get(g.kind, 0) + 1
    return ", ".join(f"{n} {_KIND_WORDS.get(kind, kind)}" for kind, n in kinds.items())


def _tokens_expr(rkv: RankKV, blocks: int) -> tuple[str, str]:
    dcp = f" × {rkv.dcp}" if rkv.dcp > 1 else ""
    dcp_words = " × dcp" if rkv.dcp > 1 else ""
    if rkv.n_groups > 1:
        formula = (
            f"blocks // kv_cache_groups × block_size{dcp_words} — vLLM splits the block pool among its "
            f"{rkv.n_groups} KV-cache groups ({_group_words(rkv)}) before multiplying by the block size "
            f"({_RULES} _report_kv_cache_config)"
        )
        return formula, f"{blocks:,} // {rkv.n_groups} × {rkv.block_size}{dcp}"
    return f"blocks × block_size{dcp_words}", f"{blocks:,} × {rkv.block_size}{dcp}"


def _budget_entries(result: PlanResult) -> JSON:
    plan = result.plan
    binding = _binding_ledger(result)
    if binding is None or binding.requested is None or plan.engine.kv_cache_memory_bytes is not None:
        return {}
    rows = [binding.weights, binding.non_torch, binding.activation]
    graphs = " − cuda_graphs" if result.rules.cuda_graphs_in_budget else ""
    if result.rules.cuda_graphs_in_budget:
        rows.append(binding.cuda_graphs)
    extra = [(name, c) for name, c in (("lora", binding.lora), ("speculative", binding.speculative)) if c is not None]
    graphs += "".join(f" − {name}" for name, _ in extra)
    rows += [c for _, c in extra]
    return {
        **_lora_entries(result, binding.label),
        "kv_bytes": {
            "formula": f"requested − weights − non_torch − activation{graphs}",
            "values": " − ".join([fmt_bytes(binding.requested.bytes), *(fmt_bytes(_val(c)) for c in rows)]),
            "result": fmt_bytes(binding.kv.bytes),
            "inputs": _inputs(binding.requested, *rows),
        },
        "requested_bytes": {
            "formula": "ceil(total × gpu_memory_utilization)",
            "values": f"ceil({fmt_bytes(_val(binding.total))} × {plan.engine.gpu_memory_utilization})",
            "result": fmt_bytes(binding.requested.bytes),
            "inputs": _inputs(binding.total),
        },
    }


def _binding_ledger(result: PlanResult) -> RankLedger | None:
    """The first rank labelled as the binding rank (one ledger made, not one per rank)."""
    index = index_of(result.ledgers, result.admission.binding_rank)
    return None if index is None else result.ledgers[index]


def _lora_entries(result: PlanResult, label: str) -> JSON:
    """The LoRA slots on the binding rank as the sum of its wrapped modules (app.core.lora)."""
    index = index_of(result.ledgers, label)
    extra = result.extras[index] if index is not None and index < len(result.extras) else None
    if extra is None or extra.lora_bytes is None:
        return {}
    lora = result.plan.engine.lora
    assert lora is not None
    names = [name for name, b in extra.lora_modules if b]
    return {
        "lora_bytes": {
            "formula": f"Σ over the wrapped modules ({', '.join(names)}) of max_loras {lora.max_loras} × "
            f"(A r × in + B out × r) at max_lora_rank {lora.max_lora_rank}, ÷ TP where vLLM shards, in the LoRA "
            "dtype (vllm/lora/layers create_lora_weights)",
            "values": " + ".join(fmt_bytes(b) for _, b in extra.lora_modules if b),
            "result": fmt_bytes(extra.lora_bytes),
            "inputs": "estimated",
        }
    }


def _encoder_entries(result: PlanResult) -> JSON:
    """The encoder cache held through vLLM's profile run (part of the activation row) and the
    draft's share of the bytes per token."""
    from app.core.plan import draft_kv_bpt, encoder_cache_of

    out: JSON = {}
    terms = encoder_cache_of(result)
    if terms is not None:
        out["encoder_cache_bytes"] = {
            "formula": "items profiled × max tokens per item × bytes per cached embedding (text hidden × dtype × "
            "(1 + deepstack levels)); items = max(encoder budget, one item) // tokens per item "
            "(vllm/v1/core/encoder_cache_manager.py compute_mm_encoder_budget) — inside the activation row",
            "values": f"{terms.items_profiled} × {terms.max_tokens_per_item:,} × {terms.per_token_bytes:,} B",
            "result": fmt_bytes(terms.cache_bytes),
            "inputs": "estimated",
        }
    spec = result.plan.engine.speculative
    if spec is not None:
        draft, layers = draft_kv_bpt(result.plan, result.rkv), _draft_layers(result)
        if layers and draft:
            out["draft_kv_bytes_per_token"] = {
                "formula": "draft attention layers × bytes per token per layer (they share the block pool: "
                "vllm/v1/worker/gpu_model_runner.py get_kv_cache_spec)",
                "values": f"{layers} × {draft // layers:,}",
                "result": f"{draft:,} B",
                "inputs": "estimated",
            }
    return out


def _draft_layers(result: PlanResult) -> int:
    from app.core.speculative import draft_layers

    spec = result.plan.engine.speculative
    return draft_layers(result.plan.model.shape, spec) if spec is not None and not result.rkv.is_hybrid else 0


def _geometry_entries(result: PlanResult, kv_inputs: str, binding_kv: int) -> JSON:
    adm, rkv = result.admission, result.rkv
    rkv = adm.binding_spec or rkv  # PP stages of different layer counts: the binding stage's geometry
    layers, page_l, gsize = attention_layers(rkv), rkv.page_bytes_per_layer, rkv.group_size
    out: JSON = {
        "kv_bytes_per_token": {
            "formula": "attention layers on the rank × page bytes per layer / block_size "
            "(a Mamba/GDN state is one page per request, not per token)",
            "values": f"{layers} × {page_l:,} / {rkv.block_size}",
            "result": f"{rkv.kv_bytes_per_token:,} B",
            "inputs": "derived",
            "detail": f"{rkv.layers_on_rank} layers, {rkv.kv_heads_per_rank} KV heads/rank, dtype {rkv.kv_cache_dtype}",
        },
        "blocks": {
            "formula": "min over ranks of max(0, kv_bytes // page_bytes // layers_per_group) "
            f"({_RULES} get_num_blocks)",
            "values": f"max(0, {binding_kv:,} // {page_l:,} // {gsize})",
            "detail": f"on rank {adm.binding_rank}, the rank with the fewest blocks",
            "result": f"{adm.blocks:,}",
            "inputs": kv_inputs,
        },
    }
    formula, values = _tokens_expr(rkv, adm.blocks)
    out["tokens"] = {"formula": formula, "values": values, "result": f"{adm.tokens:,}", "inputs": kv_inputs}
    if adm.raw_tokens is not None:
        dcp = f" × {rkv.dcp}" if rkv.dcp > 1 else ""
        out["raw_tokens"] = {
            "formula": "max(0, kv_bytes) × block_size // (page_bytes × kv_cache_groups): token positions before "
            "rounding to whole blocks, each KV-cache group taking its share of the pool",
            "values": f"max(0, {binding_kv:,}) × {rkv.block_size}{dcp} // ({rkv.page_bytes:,} × {rkv.n_groups})",
            "result": f"{adm.raw_tokens:,}",
            "inputs": kv_inputs,
        }
    return out


def _admission_entries(result: PlanResult, kv_inputs: str) -> JSON:
    adm, plan = result.admission, result.plan
    num, den = decimal_ratio(plan.policy.growth_reserve)
    out: JSON = {
        "schedulable_tokens": {
            "formula": "floor(tokens × (1 − growth_reserve))",
            "values": f"{adm.tokens:,} × ({den} − {num}) // {den}",
            "result": f"{adm.schedulable_tokens:,}",
            "inputs": kv_inputs,
        }
    }
    spec = plan.engine.speculative
    ahead = spec.lookahead_tokens if spec is not None else 0
    if adm.concurrency_ceiling is not None and plan.policy.avg_live_tokens and ahead:
        out["concurrency_ceiling"] = {
            "formula": "floor(schedulable_tokens / (avg_live_tokens + lookahead tokens)) — vLLM's scheduler reserves "
            "num_speculative_tokens slots per running request (num_lookahead_tokens, vllm/v1/core/sched/scheduler.py)",
            "values": f"{adm.schedulable_tokens:,} // ({plan.policy.avg_live_tokens:,} + {ahead})",
            "result": f"{adm.concurrency_ceiling:,}",
            "inputs": kv_inputs,
        }
    elif adm.concurrency_ceiling is not None and plan.policy.avg_live_tokens:
        out["concurrency_ceiling"] = {
            "formula": "floor(schedulable_tokens / avg_live_tokens)",
            "values": f"{adm.schedulable_tokens:,} // {plan.policy.avg_live_tokens:,}",
            "result": f"{adm.concurrency_ceiling:,}",
            "inputs": kv_inputs,
        }
    if adm.per_request_blocks > 0:
        out["max_concurrency_at_max_model_len"] = {
            "formula": "blocks / per-request worst-case blocks at max_model_len "
            f"({_RULES} get_max_concurrency_for_kv_cache_config)",
            "values": f"{adm.blocks:,} / {adm.per_request_blocks:,}",
            "result": f"{adm.max_concurrency_at_max_model_len:.2f}x",
            "inputs": kv_inputs,
        }
    mml = plan.engine.max_model_len
    if result.rules.kv_size_is_derived and adm.per_request_blocks > 0:
        formula = (
            "int(blocks / per-request blocks × max_model_len) — derived, not a count of physical tokens (vLLM ≥0.21)"
        )
        values = f"int({adm.blocks:,} / {adm.per_request_blocks:,} × {mml:,})"
    else:
        formula, values = _tokens_expr(result.rkv, adm.blocks)
        formula += " (vLLM before 0.21)"
    out["vllm_kv_cache_size_tokens"] = {
        "formula": formula,
        "values": values,
        "result": f"{adm.vllm_kv_cache_size_tokens:,}",
        "inputs": kv_inputs,
    }
    return out


def explain(result: PlanResult) -> JSON:
    """Every headline number as formula, values plugged in, result, and measured/estimated."""
    adm = result.admission
    binding = _binding_ledger(result)
    kv_inputs = _inputs(binding.kv) if binding else "estimated"
    first = index_of(result.ledgers, adm.binding_rank)  # the first rank with the binding label
    binding_kv = adm.ranks[first].kv_bytes if first is not None else 0
    out = {
        **_budget_entries(result),
        **_room_from_blocks_entry(result, binding),
        **_geometry_entries(result, kv_inputs, binding_kv),
        **_admission_entries(result, kv_inputs),
        **tier_entries(result),
        **prefix_entries(result),
        **dp_entries(result),
    }
    extra = _encoder_entries(result)
    if "draft_kv_bytes_per_token" in extra:
        draft = result.rkv.kv_bytes_per_token - _draft_share(result)
        inputs = out.get("kv_bytes_per_token", {}).get("inputs", "estimated")
        out["kv_bytes_per_token"] = {
            "formula": "the target's bytes per token + the draft's (its layers sit in the same block pool)",
            "values": f"{draft:,} + {_draft_share(result):,}",
            "result": f"{result.rkv.kv_bytes_per_token:,} B",
            "inputs": inputs,
        }
    return {**out, **extra}


def _room_from_blocks_entry(result: PlanResult, binding: RankLedger | None) -> JSON:
    """A KV room taken from the block count a log states (services.blocks_room): vLLM's
    ``num_blocks = available // page_size // num_layers`` read backwards, within one block."""
    room = None if binding is None or result.plan.engine.kv_cache_memory_bytes is not None else binding.inp.kv_room
    rkv = result.rkv
    if room is None or not room.note.startswith(ROOM_FROM_BLOCKS) or rkv.page_bytes <= 0 or binding is None:
        return {}
    uniform = rkv.page_bytes == rkv.page_bytes_per_layer * rkv.group_size
    if binding.kv is not room or room.bytes % rkv.page_bytes or not uniform:
        return {}  # a what-if moved the room, or another geometry: the identity no longer holds
    return {"kv_bytes": {
        "formula": "blocks × page_bytes × layers — the block count the log states times the bytes of one block per "
                   f"layer and the layers on the rank: within one block of the memory vLLM sized ({_RULES} "
                   "get_num_blocks: num_blocks = available // page_size // num_layers)",
        "values": f"{room.bytes // rkv.page_bytes:,} × {rkv.page_bytes_per_layer:,} × {rkv.group_size}",
        "result": fmt_bytes(room.bytes),
        "inputs": "measured",
    }}


def _draft_share(result: PlanResult) -> int:
    from app.core.plan import draft_kv_bpt

    return draft_kv_bpt(result.plan, result.rkv)

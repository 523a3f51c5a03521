"""Which pipeline stage each rank of a plan is on, and so the KV geometry its blocks come from.

vLLM sizes every worker from its own layers and then gives all the minimum block count: V0
(vllm/worker/cache_engine.py ``CacheEngine.get_cache_block_size``, the stage's layers through
``get_num_layers_by_block_type(parallel_config)``; the executor takes the min over workers), V1 from
PP's start (PR #12996, 9605c1256: ``get_kv_cache_config`` per worker's spec, then the min), and from
the hybrid allocator's PP support (PR #23974, 8e5cdcda4) ``get_kv_cache_configs`` projects the
global groups onto each worker's layers (``_project_kv_cache_groups_to_worker`` since PR #33698,
c5a66d169; vllm/v1/core/kv_cache_utils.py @4dd49b06f, v0.19) and ``get_kv_cache_config_from_groups``
divides that worker's bytes by page × its layers per group. So a stage with fewer layers gets more
blocks from the same bytes, in every version: the rule needs no version gate.

A rank labelled with its worker rank ("rank=3", "rank3", "3": an imported log, whole or partial) is
on stage (rank // tp) % pp (vLLM's rank = pp_rank × tp + tp_rank). Otherwise ranks are PP
stage-major, TP within a stage (`app.core.plan.check_rank_count`): position i of a whole replica
list is on stage (i // tp) % pp. Failing both, every rank keeps the tight stage's geometry (the
plan's `rkv`, as before).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.core.kvrank import RankKV

_RANK_NUMBER = re.compile(r"^(?:rank)?\s*[=:#]?\s*(\d+)$", re.IGNORECASE)


def distinct_stages(stages: Sequence[RankKV]) -> bool:
    """Whether the stages' blocks differ (a page of another size on some stage)."""
    return len({(s.page_bytes, s.page_bytes_per_layer, s.group_size) for s in stages}) > 1


def stage_positions(
    labels: Sequence[str], tp: int, pp: int, stages_given: Sequence[int] | None = None
) -> list[int] | None:
    """Each position's PP stage; None when it cannot be told (then every rank is the tight stage)."""
    if stages_given is not None and len(stages_given) == len(labels):
        return [s % pp for s in stages_given]
    numbers = [_RANK_NUMBER.match(label.strip()) for label in labels]
    if labels and all(numbers):  # worker ranks in the labels (an imported log): they say the stage
        return [(int(m.group(1)) // tp) % pp for m in numbers if m is not None]
    n, per_replica = len(labels), tp * pp
    if n and n % per_replica == 0:
        return [(i // tp) % pp for i in range(n)]
    return None


def rank_stage_kv(
    stages: Sequence[RankKV] | None, labels: Sequence[str], tp: int, pp: int,
    stages_given: Sequence[int] | None = None,
) -> list[RankKV] | None:  # fmt: skip
    """Each position's stage geometry (the same objects, one per stage); None when the stages'
    blocks are alike or the positions' stages are unknown."""
    if stages is None or len(stages) != pp or not distinct_stages(stages):
        return None
    positions = stage_positions(labels, tp, pp, stages_given)
    if positions is None:
        return None
    return [stages[s] for s in positions]

"""From per-rank KV bytes to what the scheduler admits.

vLLM gives every worker the minimum block count found across workers
(`get_kv_cache_configs`, vllm/v1/core/kv_cache_utils.py:1945 @52a31ccec): the rank with the
fewest blocks binds, and the other ranks' extra bytes are stranded (kv_i − kv_min). Tensor
parallelism does not multiply capacity: one logical token takes a shard on every rank.

The null block: ``BlockPool`` keeps one block back (vllm/v1/core/block_pool.py ``null_block``), so a
request can use ``blocks − 1``. From vLLM 0.28 (PR #47272, see app.core.versions) the start-up check
and its estimated largest max_model_len subtract that block; before, a pool of exactly one
max-length request starts and that request never schedules. ``num_gpu_blocks_override`` replaces
every worker's block count (``may_override_num_blocks``), and from v0.21 (PR #41069) the check
sizes the available bytes as ``override × bytes per block`` (``get_kv_cache_configs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from operator import floordiv

from app.core.kvrank import concurrency as max_concurrency
from app.core.kvspec import RankKV
from app.core.lazy_rows import LazyRows
from app.core.units import decimal_ratio


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    growth_reserve: float
    avg_live_tokens: int | None
    kv_size_is_derived: bool = True
    null_block_in_check: bool = False
    null_block_exists: bool = True
    num_gpu_blocks_override: int | None = None
    override_in_check: bool = True


@dataclass(frozen=True, slots=True)
class RankAdmission:
    label: str
    kv_bytes: int
    blocks: int
    tokens: int
    raw_tokens: int | None
    stranded_bytes: int
    binding: bool


@dataclass(frozen=True, slots=True)
class Admission:
    ranks: Sequence[RankAdmission]
    binding_rank: str | None
    binding_reason: str
    blocks: int
    tokens: int
    raw_tokens: int | None
    schedulable_tokens: int
    concurrency_ceiling: int | None
    concurrency: int | None
    binding_limit: str
    max_concurrency_at_max_model_len: float
    vllm_kv_cache_size_tokens: int
    per_request_blocks: int
    per_request_bytes: int
    fits_max_model_len: bool
    largest_max_model_len: int
    stranded_bytes: int
    usable_blocks: int = 0
    servable_max_model_len: bool = True
    null_block_in_check: bool = False
    # The binding rank's own PP-stage geometry when the stages' blocks differ (app.core.stage_kv)
    binding_spec: RankKV | None = None


def schedulable(tokens: int, growth_reserve: float) -> int:
    """floor(tokens × (1 − growth_reserve)), on the decimal value the user wrote."""
    num, den = decimal_ratio(growth_reserve)
    return tokens * (den - num) // den


class RankAdmissions(LazyRows[RankAdmission]):
    """Every rank's blocks, tokens and stranded bytes, each `RankAdmission` made when asked for."""

    __slots__ = ("_rkv", "_stage_kv", "binding_blocks", "binding_label", "blocks", "floor_kv", "kv_bytes", "labels")

    def __init__(self, labels: Sequence[str], kv_bytes: Sequence[int], blocks: Sequence[int], floor_kv: int,
                 binding_label: str | None, rkv: RankKV, stage_kv: Sequence[RankKV] | None = None) -> None:  # fmt: skip
        self.labels, self.kv_bytes, self.blocks, self.floor_kv = labels, kv_bytes, blocks, floor_kv
        self.binding_label, self._rkv, self._stage_kv = binding_label, rkv, stage_kv
        self.binding_blocks = min(blocks, default=0) if stage_kv is not None else 0

    def __len__(self) -> int:
        return len(self.kv_bytes)

    @property
    def per_stage(self) -> bool:
        """Whether the ranks' PP stages have pages of their own (uneven stages): a row's tokens, raw
        tokens and stranded bytes then need its stage's geometry (`row`), not one column formula."""
        return self._stage_kv is not None

    def row(self, i: int) -> RankAdmission:
        label, kv, blocks, floor_kv = self.labels[i], self.kv_bytes[i], self.blocks[i], self.floor_kv
        rkv = self._rkv
        if self._stage_kv is not None:  # the stage's floor: the binding blocks on its page + the binding remainder
            rkv = self._stage_kv[i]
            floor_kv += self.binding_blocks * (rkv.page_bytes - self._rkv.page_bytes)
        return RankAdmission(label, kv, blocks, rkv.tokens_for_blocks(blocks), rkv.raw_tokens(kv),
                             kv - floor_kv if kv > floor_kv else 0, label == self.binding_label)  # fmt: skip



def _rank_blocks(
    kvs: Sequence[int], rkv: RankKV, policy: AdmissionPolicy, stage_kv: Sequence[RankKV] | None = None
) -> tuple[Sequence[int], Sequence[int]]:
    """(bytes the check sees, blocks) per rank, after ``num_gpu_blocks_override``; blocks as
    ``RankKV.blocks_for`` (vLLM ``get_num_blocks``) of the rank's own stage (`stage_kv`, per position;
    None: every rank has `rkv`'s geometry)."""
    override = policy.num_gpu_blocks_override
    if override is not None:
        blocks = [override] * len(kvs)
        if policy.override_in_check:  # get_kv_cache_configs: available = override × bytes per block (≥ v0.21)
            pages = [override * r.page_bytes for r in stage_kv] if stage_kv else [override * rkv.page_bytes] * len(kvs)
            return pages, blocks
        return kvs, blocks
    if stage_kv is not None:  # each worker sized from its own layers (get_kv_cache_config_from_groups)
        return kvs, [r.blocks_for(kv) for r, kv in zip(stage_kv, kvs, strict=True)]
    if rkv.page_bytes <= 0:
        return kvs, [0] * len(kvs)
    # ⌊⌊kv / per_layer⌋ / group⌋ = ⌊kv / (per_layer × group)⌋ for kv ≥ 0: one C-level pass when no rank is short
    page = rkv.page_bytes_per_layer * rkv.group_size
    if kvs and min(kvs) > 0:
        return kvs, list(map(floordiv, kvs, repeat(page, len(kvs))))
    return kvs, [kv // page if kv > 0 else 0 for kv in kvs]


def _binding(kvs: Sequence[int], blocks: Sequence[int], per_stage: bool = False) -> tuple[int, int, int]:
    """The first rank with the fewest blocks and, among those, the least KV: (position, kv, blocks),
    position −1 without ranks. With one geometry (`per_stage` False) a rank's blocks never fall as its
    KV rises (`_rank_blocks`), so that is the first rank with the least KV; with PP stages of
    different layer counts the fewest blocks can sit on a rank with more KV."""
    if not blocks:
        return -1, 0, 0
    i = min(range(len(blocks)), key=lambda j: (blocks[j], kvs[j])) if per_stage else kvs.index(min(kvs))
    return i, kvs[i], blocks[i]


def admit(
    kv_by_rank: tuple[tuple[str, int], ...], rkv: RankKV, policy: AdmissionPolicy,
    stage_kv: Sequence[RankKV] | None = None,
) -> Admission:
    """Blocks and tokens per rank, the binding rank, and the group's admission limits."""
    labels, kvs = [label for label, _ in kv_by_rank], [kv for _, kv in kv_by_rank]
    adm = admit_columns(labels, kvs, rkv, policy, stage_kv=stage_kv)
    return replace(adm, ranks=tuple(adm.ranks))


def admit_columns(
    labels: Sequence[str], kvs: Sequence[int], rkv: RankKV, policy: AdmissionPolicy, unique_labels: bool = False,
    stage_kv: Sequence[RankKV] | None = None,
) -> Admission:
    """`admit` over columns (labels and KV bytes per rank); `ranks` made on demand. `unique_labels`:
    the caller knows no two ranks share a label (the binding reason's other ranks are then every
    position but the binding one). `stage_kv`: each position's own PP-stage geometry (None: all `rkv`);
    the per-request need, the check and the largest length are then the binding stage's, as vLLM
    checks each worker against its own layers (`_check_enough_kv_cache_memory` per projected worker
    groups, vllm/v1/core/kv_cache_utils.py `get_kv_cache_configs` @4dd49b06f, PR #33698)."""
    kvs, blocks = _rank_blocks(kvs, rkv, policy, stage_kv)
    at, min_kv, min_blocks = _binding(kvs, blocks, stage_kv is not None)
    binding_label = labels[at] if at >= 0 else None
    if stage_kv is not None and at >= 0:
        rkv = stage_kv[at]
    floor_kv = max(0, min_kv)
    ranks = RankAdmissions(labels, kvs, blocks, floor_kv, binding_label, rkv, stage_kv)
    tokens = rkv.tokens_for_blocks(min_blocks)
    sched = schedulable(tokens, policy.growth_reserve)
    ceiling = sched // policy.avg_live_tokens if policy.avg_live_tokens else None
    per_req_blocks = rkv.per_request_blocks(policy.max_model_len, policy.max_num_batched_tokens)
    per_req_bytes = per_req_blocks * rkv.page_bytes  # RankKV.per_request_bytes
    held = 1 if policy.null_block_in_check else 0  # PR #47272: the check leaves the null block out
    check_kv = max(0, floor_kv - held * rkv.page_bytes)
    fits = per_req_bytes <= check_kv and min_blocks - held >= per_req_blocks
    usable = max(0, min_blocks - 1) if policy.null_block_exists else min_blocks
    conc = max_concurrency(min_blocks, per_req_blocks)
    limit, concurrency = _binding_limit(fits, ceiling, policy.max_num_seqs)
    derived = int(conc * policy.max_model_len) if policy.kv_size_is_derived else tokens
    return Admission(
        ranks=ranks,
        binding_rank=binding_label,
        binding_reason=_reason(labels, blocks, binding_label, min_blocks, at if unique_labels else None),
        blocks=min_blocks,
        tokens=tokens,
        raw_tokens=rkv.raw_tokens(min_kv),
        schedulable_tokens=sched,
        concurrency_ceiling=ceiling,
        concurrency=concurrency,
        binding_limit=limit,
        max_concurrency_at_max_model_len=conc,
        vllm_kv_cache_size_tokens=derived,
        per_request_blocks=per_req_blocks,
        per_request_bytes=per_req_bytes,
        fits_max_model_len=fits,
        largest_max_model_len=rkv.largest_max_model_len(check_kv, policy.max_num_batched_tokens),
        stranded_bytes=_stranded(kvs, floor_kv, min_kv) if stage_kv is None else sum(r.stranded_bytes for r in ranks),
        usable_blocks=usable,
        servable_max_model_len=fits and per_req_blocks <= usable,
        null_block_in_check=policy.null_block_in_check,
        binding_spec=rkv if stage_kv is not None else None,
    )


def _binding_limit(fits: bool, ceiling: int | None, max_num_seqs: int) -> tuple[str, int | None]:
    if not fits:
        return "max_model_len", 0
    if ceiling is None:
        return "max_num_seqs", max_num_seqs
    if ceiling <= max_num_seqs:
        return "kv_blocks", ceiling
    return "max_num_seqs", max_num_seqs


def _stranded(kvs: Sequence[int], floor_kv: int, min_kv: int) -> int:
    """Σ (kv − floor) over the ranks above the floor; when the floor is the least KV every rank is at
    or above it, so the sum runs over all (one C-level `sum`)."""
    if floor_kv == min_kv:
        return sum(kvs) - floor_kv * len(kvs)
    return sum([kv - floor_kv for kv in kvs if kv > floor_kv])


def _reason(
    labels: Sequence[str], blocks: Sequence[int], label: str | None, min_blocks: int, at: int | None = None
) -> str:
    """Why `label` binds; `at`: its position when no other rank has its label."""
    if label is None:
        return "no ranks"
    if len(labels) == 1:
        return f"rank {label} is the only rank: {min_blocks:,} blocks"
    if at is not None:  # the other ranks: every position but the binding one's
        others: Sequence[int] = [*blocks[:at], *blocks[at + 1:]]
    else:
        others = [b for lb, b in zip(labels, blocks, strict=True) if lb != label]
    if not others or max(others) == min_blocks:  # no rank has fewer than min_blocks
        return f"all ranks have {min_blocks:,} blocks; rank {label} is the first with the fewest"
    return (
        f"rank {label} has the fewest blocks ({min_blocks:,}); vLLM gives every worker the minimum, "
        f"the next smallest rank has {min(others):,}"
    )

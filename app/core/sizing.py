"""Sizing: from what must be served to the smallest deployments that serve it (issue 13).

The inverse of a plan. The search enumerates every GPU preset × TP degree × PP × KV dtype ×
weight quantization × utilization × engines per GPU (one *engine configuration*), and every
data-parallel replica count within ``max_gpus`` (a *candidate*). It never computes memory itself:
``evaluate`` (given by the caller) runs the one plan computation (`app.core.plan.compute` on the
plan document of that configuration) and returns what it found. DP replicas are independent
engines (DESIGN "Sizing"): the engine's result holds for every replica and their concurrency adds
up; TP and PP ranks never add tokens. So one evaluation serves every replica count — except for a
MoE model, whose experts vLLM splits over tp × dp (``FusedMoEParallelConfig.make``, fused_moe/
config.py @28be48fa9): its engines are planned per replica count (``sizing_answer.Planned``).

A candidate meets the target when its engine starts, one ``max_model_len`` request fits, and the
replicas' concurrency (each engine's ceiling at ``avg_live_tokens``, capped by ``max_num_seqs``)
reaches ``concurrency`` and / or their schedulable tokens reach ``tokens``.

Several engines per GPU (``engines_per_gpu`` = N): each engine gets ``gpu_memory_utilization /
N`` of the card. vLLM's budget is per instance and measured against the whole card —
``requested = ceil(total × gpu_memory_utilization)`` and the engine refuses to start when
``free_memory < requested`` (``request_memory``, vllm/v1/worker/utils.py:403 @28be48fa;
CacheConfig.gpu_memory_utilization's docstring: "two vLLM instances on the same GPU … 0.5 for
each"). Engines start one after another, so the last of N sees the card less what the others
hold: ``shared_free_at_start``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from app.core.ledger import requested_bytes

#: Memory a vLLM process holds on its GPU outside its budget before it measures free memory (the
#: CUDA context, and NCCL's buffers where they are set up before the init snapshot). Measured, not
#: fitted: total − free in `Free memory on device (free/total GiB)` of processes starting on an
#: empty card — 0.25 GiB (23.31/23.56, RTX 3090 TP2, tests/data/vllm-logs/extra/
#: v021-cg-estimate-debug-suggestion.log) and 0.49 GiB (43.93/44.42, L40S TP8, log 14); the
#: larger, rounded up, so a shared card errs towards refusing.
PROCESS_BASELINE_BYTES = 512 * 1024**2
#: The most engines the search puts on one card, and the most candidates one search may hold.
MAX_ENGINES_PER_GPU = 16
MAX_CANDIDATES = 200_000


@dataclass(frozen=True, slots=True)
class Target:
    """What must be served. ``avg_live_tokens`` None: each request is taken at max_model_len."""

    max_model_len: int
    concurrency: int | None = None
    avg_live_tokens: int | None = None
    tokens: int | None = None

    @property
    def live_tokens(self) -> int:
        return self.avg_live_tokens or self.max_model_len


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything one engine's plan depends on (the replica count does not change it)."""

    gpu: str
    gpu_total_bytes: int
    tp: int
    pp: int
    engines_per_gpu: int
    kv_cache_dtype: str
    quantization: str | None
    card_utilization: float  # the share of the card the N engines together are given

    @property
    def gpu_memory_utilization(self) -> float:
        """Each engine's `--gpu-memory-utilization`: its share of the card (3 decimals, down)."""
        return math.floor(self.card_utilization * 1000 / self.engines_per_gpu) / 1000

    @property
    def free_at_start_bytes(self) -> int | None:
        """Free memory the last engine on a shared card sees (None: the card is not shared)."""
        if self.engines_per_gpu == 1:
            return None
        return shared_free_at_start(self.gpu_total_bytes, self.gpu_memory_utilization, self.engines_per_gpu)

    @property
    def compromises(self) -> tuple[bool, bool]:
        """(weights quantized, KV below the model's dtype): what the ranking avoids first."""
        return self.quantization is not None, self.kv_cache_dtype != "auto"

    @property
    def layout(self) -> tuple[str, int, int, int]:
        return self.gpu, self.tp, self.pp, self.engines_per_gpu

    @property
    def describe(self) -> str:
        """The label with the settings that differ between configurations of one layout."""
        settings = [f"KV {self.kv_cache_dtype}", f"weights {self.quantization or 'as checkpoint'}",
                    f"utilization {self.gpu_memory_utilization:g}"]  # fmt: skip
        return f"{self.label} ({', '.join(settings)})"

    @property
    def label(self) -> str:
        parts = [f"TP{self.tp}"] + ([f"PP{self.pp}"] if self.pp > 1 else [])
        if self.engines_per_gpu > 1:
            parts.append(f"{self.engines_per_gpu} engines/GPU")
        return " ".join(parts) + f" on {self.gpu}"


@dataclass(frozen=True, slots=True)
class EngineOutcome:
    """What the plan computation found for one engine."""

    starts: bool
    fits_max_model_len: bool
    tokens: int
    schedulable_tokens: int
    concurrency_ceiling: int
    max_num_seqs: int
    max_concurrency_at_max_model_len: float
    largest_max_model_len: int
    start_problem: str = ""
    no_kv_room: bool = False  # a rank's budget holds nothing past its other rows

    @property
    def serves(self) -> bool:
        return self.starts and self.fits_max_model_len

    @property
    def concurrency(self) -> int:
        """Requests one engine runs at once: its KV ceiling, capped by max_num_seqs."""
        return min(self.concurrency_ceiling, self.max_num_seqs) if self.serves else 0


@dataclass(frozen=True, slots=True)
class Candidate:
    config: EngineConfig
    outcome: EngineOutcome
    dp: int

    @property
    def gpus(self) -> int:
        return self.config.tp * self.config.pp * self.dp // self.config.engines_per_gpu

    @property
    def concurrency(self) -> int:
        return self.outcome.concurrency * self.dp

    @property
    def concurrency_ceiling(self) -> int:
        return self.outcome.concurrency_ceiling * self.dp

    @property
    def schedulable_tokens(self) -> int:
        return self.outcome.schedulable_tokens * self.dp


def shared_free_at_start(total_bytes: int, utilization: float, engines: int) -> int:
    """Free memory at start of the last of `engines` engines started one after another on a card.

    Each earlier engine holds its whole budget (its KV pool is sized to fill it; the activation
    peak it profiled comes back under load) plus its process baseline; the starting engine's own
    baseline is already taken when it measures (MemorySnapshot after init, gpu_worker.py).
    """
    held = requested_bytes(total_bytes, utilization) + PROCESS_BASELINE_BYTES
    return total_bytes - PROCESS_BASELINE_BYTES - (engines - 1) * held


@dataclass(frozen=True)
class Space:
    """The search space: each list is tried in full (their product, within max_gpus)."""

    gpus: Sequence[tuple[str, int]]  # (preset name, total bytes)
    tp: Sequence[int]
    pp: Sequence[int]
    kv_cache_dtype: Sequence[str]
    quantization: Sequence[str | None]
    gpu_memory_utilization: Sequence[float]
    engines_per_gpu: Sequence[int]
    max_gpus: int


def engine_configs(space: Space) -> Iterator[EngineConfig]:
    """Every engine configuration whose single replica fits within max_gpus (one engine per GPU
    before several, so that `search` can skip what a whole card already cannot hold)."""
    for (name, total), tp, pp, n, quant, dtype, util in itertools.product(
        space.gpus, space.tp, space.pp, sorted(space.engines_per_gpu), space.quantization, space.kv_cache_dtype,
        space.gpu_memory_utilization,
    ):  # fmt: skip
        if tp * pp <= space.max_gpus:
            yield EngineConfig(name, total, tp, pp, n, dtype, quant, util)


def replica_counts(config: EngineConfig, max_gpus: int) -> range:
    """DP replica counts within max_gpus: whole cards, so a multiple of engines_per_gpu."""
    n = config.engines_per_gpu
    return range(n, n * (max_gpus // (config.tp * config.pp)) + 1, n)


def space_size(space: Space) -> int:
    """How many candidates (engine configuration × replica count) the space holds."""
    per_layout = sum(len(replica_counts(c, space.max_gpus)) for c in _layout_configs(space))
    return per_layout * len(space.quantization) * len(space.kv_cache_dtype) * len(space.gpu_memory_utilization)


def _layout_configs(space: Space) -> Iterator[EngineConfig]:
    for (name, total), tp, pp, n in itertools.product(space.gpus, space.tp, space.pp, space.engines_per_gpu):
        if tp * pp <= space.max_gpus:
            yield EngineConfig(name, total, tp, pp, n, "auto", None, 1.0)


def meets(candidate: Candidate, target: Target) -> bool:
    if not candidate.outcome.serves:
        return False
    if target.concurrency is not None and candidate.concurrency < target.concurrency:
        return False
    return target.tokens is None or candidate.schedulable_tokens >= target.tokens


def smallest_meeting(config: EngineConfig, outcome: EngineOutcome, target: Target, max_gpus: int) -> int | None:
    """The fewest replicas that meet the target within max_gpus (None: no count does).

    Replicas add concurrency and tokens linearly, so the count is a ceiling division; the brute
    force over `replica_counts` in the tests checks it.
    """
    if not outcome.serves:
        return None
    need = 1
    if target.concurrency is not None:
        if outcome.concurrency <= 0:
            return None
        need = max(need, -(-target.concurrency // outcome.concurrency))
    if target.tokens is not None:
        if outcome.schedulable_tokens <= 0:
            return None
        need = max(need, -(-target.tokens // outcome.schedulable_tokens))
    n = config.engines_per_gpu
    dp = -(-need // n) * n
    return dp if dp in replica_counts(config, max_gpus) else None


Evaluate = Callable[[EngineConfig], "EngineOutcome | str"]

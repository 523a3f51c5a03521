"""vLLM versions and the defaults and accounting rules that changed between them.

Sources (VLLM-NOTES.md §1, §2.2; upstream vLLM read at commit 52a31ccec, 2026-05-27):
- `gpu_memory_utilization` default 0.9 → 0.92 with the CUDA-graph estimate (PR #38284,
  `vllm/config/cache.py:66`, "default since v0.21.0").
- CUDA-graph memory is subtracted from the KV budget from v0.21.0 on
  (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1`, `vllm/v1/worker/gpu_worker.py:358`); before,
  graphs were captured after KV sizing out of the `1 − utilization` headroom.
- The free-memory pre-flight (`request_memory`, `vllm/v1/worker/utils.py:403`) since v0.9.1.
- NCCL buffers stopped showing up as non-torch memory when the init snapshot moved after
  NCCL init (`abad204be`, v0.10.2).
- "GPU KV cache size" became `int(max_concurrency × max_model_len)` (`e68fa1b90`, PR #41069,
  2026-04-28, taken here as v0.21); before it was the block-rounded token count. The same PR made
  the start-up check and the block count use ``num_gpu_blocks_override × bytes per block``.
- vLLM's ``BlockPool`` holds one block back as the null block (``block_pool.py``, since
  ``3a5f0afcd``, 2025-04-01, PR #14097, ≈v0.8.3): only ``num_blocks − 1`` serve requests. PR #47272
  ("Reserve the KV null block when validating max_model_len", merged after 2026-08-16, when its
  thread still waited on review) makes the start-up check and its estimated maximum length
  subtract that block. The v0.27.x branch was cut from main at ``f5bb701f`` on 2026-08-03, before
  the merge, so 0.28.0 is the first release taken to contain it (the merge commit is later than the
  local mirror, which ends 2026-05-24). #47272 leaves ``--max-model-len auto`` as it was (the
  auto-fit is PR #48724, open).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from app.core.errors import InputError

CURRENT_VLLM = "0.27.1"

Version = tuple[int, int, int]
NULL_BLOCK_CHECK_SINCE: Version = (0, 28, 0)  # vLLM PR #47272 (see the module docstring)
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (vllm/envs.py) exists from PR #30515 (`ebb9cc5f2`,
# 2026-03-07), opt-in ("0"); main was 0.18.dev then (the opt-in builds' advice reads "This will become
# the default in v0.19"), so v0.18.0 is taken as the first release with it. PR #38284 (`96a85c575`,
# 2026-04-21, v0.21.0) made "1" the default. `Worker.determine_available_memory`
# (vllm/v1/worker/gpu_worker.py @4dd49b06f, v0.19.0) always profiles the graphs
# (`profile_cudagraph_memory`) but subtracts the estimate from the KV budget only when the variable is
# set: `cudagraph_memory_estimate_applied = estimate if envs.VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS else 0`.
ESTIMATE_CUDAGRAPHS_SINCE: Version = (0, 18, 0)
ESTIMATE_CUDAGRAPHS_DEFAULT_SINCE: Version = (0, 21, 0)


def parse_version(text: str, field: str = "vllm_version") -> Version:
    """'0.10.2', 'v0.21', '0.11.1rc2', '0.1.dev20073+g8e685d198' → (major, minor, patch)."""
    match = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        raise InputError(field, f"cannot read {text!r} as a vLLM version (expected e.g. 0.10.2)")
    major, minor, patch = match.group(1), match.group(2), match.group(3) or "0"
    return int(major), int(minor), int(patch)


@dataclass(frozen=True)
class VersionRules:
    """The accounting rules of one vLLM version."""

    version: Version
    default_gpu_memory_utilization: float
    cuda_graphs_in_budget: bool
    free_memory_preflight: bool
    nccl_in_non_torch: bool
    kv_size_is_derived: bool
    requested_is_ceil: bool
    override_in_check: bool = True
    null_block_in_check: bool = False
    null_block_exists: bool = True

    @property
    def label(self) -> str:
        return ".".join(str(p) for p in self.version)


@functools.lru_cache(maxsize=256)
def rules_for(version_text: str | None) -> VersionRules:
    """The rules in force for a vLLM version (None → the current release; memoised, frozen)."""
    version = parse_version(version_text or CURRENT_VLLM)
    at_least_021 = version >= (0, 21, 0)
    return VersionRules(
        version=version,
        default_gpu_memory_utilization=0.92 if at_least_021 else 0.9,
        cuda_graphs_in_budget=version >= ESTIMATE_CUDAGRAPHS_DEFAULT_SINCE,
        free_memory_preflight=version >= (0, 9, 1),
        nccl_in_non_torch=version < (0, 10, 2),
        kv_size_is_derived=at_least_021,
        requested_is_ceil=version >= (0, 14, 0),
        override_in_check=at_least_021,
        null_block_in_check=version >= NULL_BLOCK_CHECK_SINCE,
        null_block_exists=version >= (0, 8, 3),
    )


def with_cudagraph_estimate(rules: VersionRules, estimate: bool | None) -> VersionRules:
    """The rules under the engine's VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS (None: the version's default,
    on from v0.21): with it set, the CUDA-graph estimate is inside the KV budget (see the constants above)."""
    if estimate is None or estimate == rules.cuda_graphs_in_budget:
        return rules
    if estimate and rules.version < ESTIMATE_CUDAGRAPHS_SINCE:
        raise InputError(
            "engine.estimate_cudagraphs",
            f"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS exists from vLLM 0.18 (PR #30515); vLLM {rules.label} "
            "captures the CUDA graphs after KV sizing, outside the budget: leave it unset or false",
        )
    return replace(rules, cuda_graphs_in_budget=estimate)


def batch_defaults(gpu_total_bytes: int | None) -> tuple[int, int]:
    """vLLM's API-server defaults (max_num_batched_tokens, max_num_seqs) for a GPU size.

    `EngineArgs.get_batch_defaults` (vllm/engine/arg_utils.py): GPUs with ≥ 70 GiB get
    8192 batched tokens and 1024 sequences for the OpenAI server, smaller ones 2048 and 256.
    """
    if gpu_total_bytes is not None and gpu_total_bytes >= 70 * 1024**3:
        return 8192, 1024
    return 2048, 256


# vllm/config/cache.py before 77a73458e (2026-03-09, PR #35122, taken as v0.18): a Literal of these.
_OLD_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)


def check_block_size(block_size: int, version_text: str | None, attention: bool = True) -> None:
    """Refuse a ``--block-size`` vLLM refuses, with vLLM's rule.

    - Before v0.18 ``CacheConfig.block_size`` is ``Literal[1, 8, 16, 32, 64, 128, 256]`` (pydantic
      refuses anything else; vllm/config/cache.py before 77a73458e, PR #35122).
    - In every V1 release the CUDA attention backend stores the cache in blocks that are a multiple
      of 16 tokens: FlashAttention's ``get_supported_kernel_block_sizes`` is ``[MultipleOf(16)]`` and
      ``get_kv_cache_shape`` raises "Block size must be a multiple of 16."
      (vllm/v1/attention/backends/flash_attn.py @28be48fa9); FlashInfer's kernels take 16/32/64, and a
      larger manager block must split into them (``select_common_block_size``, gpu_model_runner.py).
    Attention-free models (Mamba only) have no attention kernel and are not checked here.
    """
    from app.core.errors import InputError

    version = parse_version(version_text or CURRENT_VLLM)
    if version < (0, 18, 0) and block_size not in _OLD_BLOCK_SIZES:
        allowed = ", ".join(str(b) for b in _OLD_BLOCK_SIZES)
        raise InputError("engine.block_size", f"vLLM {version_text} accepts --block-size {allowed}; got {block_size}")
    if attention and block_size % 16:
        raise InputError(
            "engine.block_size",
            f"{block_size} is not a multiple of 16: vLLM's CUDA attention backends store KV in blocks of a "
            "multiple of 16 tokens (FlashAttention: 'Block size must be a multiple of 16.')",
        )


def card_scheduler_defaults(
    version_text: str | None, gpu_total_bytes: int | None, gpu_name: str | None, max_model_len: int
) -> tuple[int, int, str]:
    """`scheduler_defaults` for a version as a plan states it (V1 from v0.8.0, `rules_for`): the one
    place a plan's and a lever's card pick vLLM's max_num_batched_tokens / max_num_seqs defaults."""
    version = rules_for(version_text).version
    return scheduler_defaults(version, version >= (0, 8, 0), gpu_total_bytes, gpu_name, max_model_len)


def scheduler_defaults(
    version: Version, v1: bool, gpu_total_bytes: int | None, gpu_name: str | None, max_model_len: int,
    chunked_prefill: bool | None = None,
) -> tuple[int, int, str]:  # fmt: skip
    """(max_num_batched_tokens, max_num_seqs, what was assumed) as `vllm serve` picks them.

    V1, `EngineArgs.get_batch_defaults` / `_set_default_max_num_seqs_and_batched_tokens_args`
    (vllm/engine/arg_utils.py @28be48fa), OpenAI-server usage context:
    - ≥ 70 GiB cards get 8192 tokens and 1024 sequences (PR #12369, `0e74d797c`, 2025-01-23,
      v0.7.1), except A100s from PR #17885 (`911215528`, 2025-05-11, v0.9.0); smaller cards 2048.
    - smaller cards kept V1's 1024 sequences until PR #16158 (`66d433b94`, 2025-04-08, v0.8.3),
      then 256.
    - then `max_num_batched_tokens = min(max_num_seqs × max_model_len, …)` and
      `max_num_seqs = min(max_num_seqs, max_num_batched_tokens)`.
    V0 (vllm/engine/arg_utils.py, SchedulerConfig): 256 sequences; chunked prefill on by default
    only when max_model_len > 32K (then 512 tokens before v0.7, 2048 after), otherwise
    `max(max_model_len, 2048)` tokens (the whole prompt in one step).
    """
    if not v1:
        chunked = chunked_prefill if chunked_prefill is not None else max_model_len > 32768
        if chunked:
            tokens = 512 if version < (0, 7, 0) else 2048
            return tokens, 256, f"V0 with chunked prefill: {tokens} batched tokens, 256 sequences"
        return max(max_model_len, 2048), 256, "V0 without chunked prefill: max(max_model_len, 2048) batched tokens"
    name = (gpu_name or "").lower()
    big = gpu_total_bytes is not None and gpu_total_bytes >= 70 * 1024**3 and version >= (0, 7, 1)
    if big and "a100" in name and version >= (0, 9, 0):
        big = False
    tokens = 8192 if big else 2048
    seqs = 1024 if big or version < (0, 8, 3) else 256
    tokens = min(seqs * max_model_len, tokens)
    seqs = min(seqs, tokens)
    size = "≥ 70 GiB" if big else "< 70 GiB (or an A100)"
    return tokens, seqs, f"vllm serve defaults for a {size} card: {tokens} batched tokens, {seqs} sequences"


#: From v0.10.1 a defaulted max_num_seqs is lowered to max_num_batched_tokens:
#: `self.max_num_seqs = min(default_max_num_seqs[usage_context], self.max_num_batched_tokens or sys.maxsize)`
#: (vllm/engine/arg_utils.py, `1cd6eaba5`, PR #21270, 2025-07-26, first in v0.10.1; today
#: `_set_default_max_num_seqs_and_batched_tokens_args` @4dd49b06f). Before, the default stayed.
SEQS_FOLLOW_TOKENS_SINCE: Version = (0, 10, 1)


def scheduler_seqs(
    version_text: str | None, max_num_batched_tokens: int, max_num_seqs: int | None, default_seqs: int,
    field: str = "engine.max_num_batched_tokens",
) -> int:  # fmt: skip
    """The max_num_seqs vLLM starts with at these batched tokens: the stated one, else the version's
    default (`scheduler_defaults`), lowered to the batched tokens from v0.10.1. vLLM will not start
    when max_num_batched_tokens < max_num_seqs (`SchedulerConfig`, vllm/config/scheduler.py
    @4dd49b06f: "max_num_batched_tokens (…) must be greater than or equal to max_num_seqs"; in every
    version since `a19bc5c62`, 2023): an InputError naming `field`. The one rule of the plan's
    defaults, the prefill-chunk what-if and a lever's other card."""
    rules = rules_for(version_text)
    if max_num_seqs is None and rules.version >= SEQS_FOLLOW_TOKENS_SINCE:
        return min(default_seqs, max_num_batched_tokens)
    seqs = default_seqs if max_num_seqs is None else max_num_seqs
    if max_num_batched_tokens < seqs:
        whose = (f"{seqs:,}, vLLM {rules.label}'s default, which it lowers to max_num_batched_tokens only from "
                 "v0.10.1" if max_num_seqs is None else f"{seqs:,}")
        raise InputError(field, f"max_num_batched_tokens ({max_num_batched_tokens:,}) is less than max_num_seqs "
                                f"({whose}): vLLM will not start (SchedulerConfig refuses max_num_batched_tokens "
                                "< max_num_seqs; vllm/config/scheduler.py)")
    return seqs

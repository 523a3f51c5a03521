"""KV offload tiers: the CPU (and LMCache disk) tiers behind the GPU block pool (issue 15, item 4).

Theory of operation
-------------------
``engine.kv_offload = {"backend": "native" | "lmcache", "cpu_bytes": …, "disk_bytes": …}`` is vLLM's
``--kv-offloading-size`` (GiB, a float) and ``--kv-offloading-backend``. Its rules, read at vLLM
commit 28be48fa944d (2026-05-24):

- ``CacheConfig.kv_offloading_size`` (vllm/config/cache.py): "Size of the KV cache offloading buffer in
  GiB. When TP > 1, this is the total buffer size summed across all TP ranks." The flags came in PR
  #27621 (e67511884, 2025-11-01, v0.11.1); the backend defaults to ``native`` since PR #32421
  (1be5a7357, 2026-01-15) — this planner always writes both flags, which every version since 0.11.1 reads.
- ``VllmConfig._post_init_kv_transfer_config`` (vllm/config/vllm.py): native →
  ``OffloadingConnector`` with ``cpu_bytes_to_use = size × 2**30`` for the engine; lmcache →
  ``LMCacheConnectorV1`` with ``lmcache.max_local_cpu_size = size / (tp × pp)`` per rank.
- ``CPUOffloadingSpec`` (vllm/v1/kv_offload/cpu/spec.py): ``kv_bytes_per_block`` = the worker's GPU
  KV bytes per block × ``world_size`` (tp × pp: one DP engine's workers);
  ``num_blocks = cpu_bytes_to_use // kv_bytes_per_block`` and each worker pins
  ``num_blocks × kv_bytes_per_block / world_size`` bytes of host memory.

So the size is per engine (every DP replica gets its own), split evenly over its TP × PP workers, and a
tier holds the same logical tokens on every worker (a token's KV shard lives on each, as on the GPU).
Tokens: native counts whole offloaded blocks (``tokens_for_blocks``, the GPU pool's rule); LMCache
stores whole chunks of ``chunk_size`` tokens (``LMCACHE_CHUNK_SIZE``, 256 by default) at the rank's
bytes per token; the size LMCache is given is read as GiB (LMCache's ``max_local_cpu_size`` and
``max_local_disk_size``; an LMCache rule, not vLLM's). Disk is LMCache's local-disk backend
(``LMCACHE_LOCAL_DISK``, ``LMCACHE_MAX_LOCAL_DISK_SIZE`` per rank); vLLM's native backend has no disk
tier behind ``--kv-offloading-size``.

Before 0.11.1 there are no offloading flags: LMCache (``LMCacheConnectorV1``, PR #16625, 2025-04-26,
≈v0.9.0) is configured by ``--kv-transfer-config`` and LMCache's environment; vLLM's native connector
(PR #22595, 2025-09-19, v0.11.0) only took a block count in ``--kv-transfer-config``, which this
planner does not write: such a plan is refused naming the version.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from app.core.errors import InputError
from app.core.kvrank import RankKV
from app.core.units import GIB, fmt_bytes

Backend = Literal["native", "lmcache"]
HostLink = Literal["pcie", "nvlink-c2c"]
BACKENDS: tuple[Backend, ...] = ("native", "lmcache")  # KVOffloadingBackend, vllm/config/cache.py @28be48fa
LMCACHE_DEFAULT_CHUNK = 256  # LMCache's chunk_size default (LMCACHE_CHUNK_SIZE)
FLAGS_SINCE = (0, 11, 1)  # --kv-offloading-size / --kv-offloading-backend, PR #27621
LMCACHE_SINCE = (0, 9, 0)  # LMCacheConnectorV1, PR #16625
#: Assumed host↔GPU bandwidth per GPU for a hit served from the CPU tier (bytes/s, one direction):
#: PCIe 4.0 x16 moves about 25 GB/s of pinned memory in practice (32 GB/s raw); NVLink-C2C (GH200,
#: GB200) 450 GB/s per direction (NVIDIA: 900 GB/s total). Disk reads are taken at 5 GB/s (an NVMe drive).
HOST_LINK_BYTES_PER_S: dict[str, float] = {"pcie": 25e9, "nvlink-c2c": 450e9}
DISK_BYTES_PER_S = 5e9


@dataclass(frozen=True)
class KVOffload:
    """``engine.kv_offload``: sizes are the engine's totals over its TP × PP workers (vLLM's rule)."""

    backend: Backend
    cpu_bytes: int
    disk_bytes: int | None = None
    chunk_size: int = LMCACHE_DEFAULT_CHUNK


@dataclass(frozen=True)
class Node:
    """``node``: one host's memory and how many GPUs (workers) it carries."""

    host_memory_bytes: int | None  # None: not checked
    gpus_per_node: int
    host_link: HostLink = "pcie"


@dataclass(frozen=True)
class Tier:
    name: str  # "gpu", "cpu", "disk"
    bytes: int  # the engine's total over its workers (the GPU tier: its pool in whole blocks)
    bytes_per_rank: int  # what one worker holds (CPU/disk: what it pins or writes)
    tokens: int  # logical tokens the tier holds (each worker holds its shard of every one)
    unit_tokens: int  # tokens per stored unit: the block size (GPU, native) or LMCache's chunk
    bandwidth_bytes_per_s: float | None = None  # the link a hit from this tier crosses (None: GPU)


def check_offload(offload: KVOffload, version: tuple[int, int, int], label: str) -> None:
    """Refuse what vLLM (or LMCache) at ``version`` refuses, naming the field and vLLM's reason."""
    if offload.backend not in BACKENDS:
        raise InputError("engine.kv_offload.backend", f"unknown backend {offload.backend!r}; vLLM's "
                         "--kv-offloading-backend accepts native, lmcache (KVOffloadingBackend, vllm/config/cache.py)")
    if offload.cpu_bytes <= 0:
        raise InputError("engine.kv_offload.cpu_bytes", "must be above 0: vLLM's CPUOffloadingSpec raises "
                         "'cpu_bytes_to_use must be specified' for 0, and a size of 0 turns no tier on")
    if _gib(offload.cpu_bytes) == "0":  # the flag vLLM reads in GiB would say 0, which it refuses (above)
        raise InputError("engine.kv_offload.cpu_bytes", f"{offload.cpu_bytes:,} B is --kv-offloading-size 0 in "
                         "vLLM's GiB, which CPUOffloadingSpec refuses: a bare number is bytes, give the unit (100GiB)")
    if offload.disk_bytes is not None and offload.disk_bytes <= 0:
        raise InputError("engine.kv_offload.disk_bytes", "must be above 0 (leave it out, or null, for no disk tier)")
    if offload.backend == "native" and offload.disk_bytes is not None:
        raise InputError("engine.kv_offload.disk_bytes", "vLLM's native backend has no disk tier behind "
                         "--kv-offloading-size (it sizes CPU memory only); a disk tier is LMCache's (backend lmcache)")
    if offload.backend == "native" and version < FLAGS_SINCE:
        raise InputError("engine.kv_offload.backend", f"vLLM {label} has no --kv-offloading-size (PR #27621, "
                         "v0.11.1); its native OffloadingConnector takes a block count in --kv-transfer-config, "
                         "which this planner does not write: plan at vllm_version 0.11.1 or later, or use lmcache")
    if offload.backend == "lmcache" and version < LMCACHE_SINCE:
        raise InputError("engine.kv_offload.backend", f"vLLM {label} has no LMCacheConnectorV1 (PR #16625, "
                         "2025-04-26, ≈v0.9.0)")


def _block_bytes(rkv: RankKV) -> int:
    """One GPU block's bytes on a worker: vLLM's ``total_gpu_kv_bytes // num_blocks``."""
    return rkv.page_bytes_per_layer * rkv.group_size


def kv_tiers(rkv: RankKV, gpu_blocks: int, workers: int, offload: KVOffload | None,
             host_link: HostLink = "pcie") -> tuple[Tier, ...]:
    """The GPU tier, then the offload tiers, each in bytes and the tokens it holds."""
    block = _block_bytes(rkv)
    gpu = Tier("gpu", gpu_blocks * block * workers, gpu_blocks * block, rkv.tokens_for_blocks(gpu_blocks),
               rkv.block_size)
    if offload is None:
        return (gpu,)
    link = HOST_LINK_BYTES_PER_S[host_link]
    if offload.backend == "native":
        # CPUOffloadingSpec: num_blocks = cpu_bytes_to_use // (block bytes × world_size).
        blocks = offload.cpu_bytes // (block * workers) if block > 0 else 0
        cpu = Tier("cpu", blocks * block * workers, blocks * block, rkv.tokens_for_blocks(blocks), rkv.block_size,
                   link)
        return (gpu, cpu)
    out = [gpu, _chunked("cpu", offload.cpu_bytes, workers, rkv, offload.chunk_size, link)]
    if offload.disk_bytes:
        out.append(_chunked("disk", offload.disk_bytes, workers, rkv, offload.chunk_size, DISK_BYTES_PER_S))
    return tuple(out)


def _chunked(name: str, total: int, workers: int, rkv: RankKV, chunk: int, bandwidth: float) -> Tier:
    """An LMCache tier: ``total / workers`` per rank (vLLM's split), whole chunks of the rank's bytes per token."""
    per_rank = total // workers
    chunk_bytes = chunk * rkv.kv_bytes_per_token
    chunks = per_rank // chunk_bytes if chunk_bytes > 0 else 0
    return Tier(name, chunks * chunk_bytes * workers, chunks * chunk_bytes, chunks * chunk, chunk, bandwidth)


def empty_tier_warning(tiers: tuple[Tier, ...], rkv: RankKV, offload: KVOffload | None, workers: int) -> str | None:
    """A message when an offload tier is smaller than its unit (one GPU block over the workers for the
    native backend, one chunk for LMCache): vLLM then offloads nothing to it (0 blocks / chunks)."""
    empty = [t for t in tiers[1:] if t.tokens == 0]
    if offload is None or not empty:
        return None
    per_rank = offload.cpu_bytes // workers if empty[0].name == "cpu" else (offload.disk_bytes or 0) // workers
    native = offload.backend == "native"
    unit_bytes = _block_bytes(rkv) if native else offload.chunk_size * rkv.kv_bytes_per_token
    if unit_bytes <= 0:
        return None
    unit = f"one GPU block ({unit_bytes:,} B a worker)" if native else (
        f"one {offload.chunk_size}-token chunk ({unit_bytes:,} B)")
    return (f"the {empty[0].name} KV tier holds nothing: {per_rank:,} B a worker is less than {unit}, so "
            "vLLM offloads no KV to it; give engine.kv_offload a size with its unit (e.g. 100GiB)")


def pinned_per_node(tiers: tuple[Tier, ...], gpus_on_node: int) -> int:
    """Host memory the CPU tier pins on one node: every worker on it pins its share."""
    return sum(t.bytes_per_rank for t in tiers if t.name == "cpu") * gpus_on_node


def node_warning(tiers: tuple[Tier, ...], node: Node, total_gpus: int) -> str | None:
    """A message when the pinned CPU tier of the node's workers exceeds its host memory."""
    gpus = min(node.gpus_per_node, total_gpus)
    pinned = pinned_per_node(tiers, gpus)
    if node.host_memory_bytes is None or pinned <= node.host_memory_bytes:
        return None
    per_rank = pinned // gpus if gpus else 0
    return (f"the CPU KV tier pins {fmt_bytes(pinned)} of host memory on a node ({gpus} workers × "
            f"{fmt_bytes(per_rank)}: --kv-offloading-size is split over the engine's TP × PP workers), more "
            f"than its {fmt_bytes(node.host_memory_bytes)}: lower engine.kv_offload.cpu_bytes or use more nodes")


def offload_flags(offload: KVOffload | None, version: tuple[int, int, int]) -> list[tuple[str, str]]:
    """The vLLM flags that turn the tier on (sizes in GiB as vLLM reads them)."""
    if offload is None:
        return []
    if version >= FLAGS_SINCE:
        return [("--kv-offloading-backend", offload.backend), ("--kv-offloading-size", _gib(offload.cpu_bytes))]
    config = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    return [("--kv-transfer-config", json.dumps(config, separators=(",", ":")))]


def offload_env(offload: KVOffload | None, workers: int, version: tuple[int, int, int]) -> dict[str, str]:
    """LMCache's environment (per-rank sizes in GiB): the CPU size where no flag carries it, the chunk,
    the local disk."""
    if offload is None or offload.backend != "lmcache":
        return {}
    env: dict[str, str] = {}
    if version < FLAGS_SINCE:
        env["LMCACHE_LOCAL_CPU"] = "True"
        env["LMCACHE_MAX_LOCAL_CPU_SIZE"] = _gib(offload.cpu_bytes // workers)
    if offload.chunk_size != LMCACHE_DEFAULT_CHUNK:
        env["LMCACHE_CHUNK_SIZE"] = str(offload.chunk_size)
    if offload.disk_bytes:
        env["LMCACHE_LOCAL_DISK"] = "file:///var/cache/lmcache/"
        env["LMCACHE_MAX_LOCAL_DISK_SIZE"] = _gib(offload.disk_bytes // workers)
    return env


def _gib(value: int) -> str:
    """A byte count as vLLM's GiB float, exact to the byte where it can be (``str`` of the float)."""
    return f"{value / GIB:.6f}".rstrip("0").rstrip(".")


def transfer_s(tokens: int, rkv: RankKV, tier: Tier) -> float:
    """Seconds to bring ``tokens`` back from ``tier`` (each worker moves its shard over its own link)."""
    if tier.bandwidth_bytes_per_s is None or tokens <= 0:
        return 0.0
    return tokens * rkv.kv_bytes_per_token / tier.bandwidth_bytes_per_s

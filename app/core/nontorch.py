"""The "non_torch" row: memory outside torch's allocator that vLLM's profile counts against KV.

vLLM: `non_torch_increase = after_profile.non_torch_memory − init_snapshot.non_torch_memory`
where `non_torch_memory = (total − free) − torch.cuda.memory_reserved()` (`MemorySnapshot`,
vllm/utils/mem_utils.py). So only what appears *after* the init snapshot counts:

- the CUDA context itself is created before the snapshot (not counted);
- kernel modules loaded lazily during the profile, cuBLAS/cuBLASLt handles and workspaces,
  attention-library state: counted (a per-engine constant, `Calibration.non_torch_v0/v1`);
- NCCL communicators and the custom all-reduce IPC buffers: counted only while the snapshot was
  taken *before* `init_worker_distributed_environment` — V0 (`Worker.init_device`,
  vllm/worker/worker.py: `baseline_snapshot` before distributed init) and V1 until PR #25359
  (`abad204be`, 2025-09-23, "ensuring consistent NCCL memory accounting", taken as v0.11.0).
  Their size depends on the interconnect: NVSwitch boxes (H100/H200/B200 SXM) allocate
  NVLink-SHARP buffers, PCIe boxes do not (`Calibration.nccl_nvlink/nccl_pcie`).

Before PR #10511 (V0, `551603fef`, v0.6.5) and PR #18974 (V1, `2d8476e46`, 2025-06-07, v0.9.1)
there was no init snapshot: the row was `(total − free) − torch allocated` after the profile
(V0 vllm/worker/worker.py and V1 vllm/v1/worker/gpu_worker.py `determine_available_memory`),
so it held the CUDA context, torch's cached-but-unallocated blocks and any other process on the
card too (`Calibration.non_torch_whole`; other processes cannot be known and are not counted).

What the config cannot tell (other processes' allocations, NCCL environment variables, whether
NVLS is enabled) is stated in the cell's note; an unknown interconnect is taken as NVLink, the
larger row, so the estimate errs towards less KV.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.core.calibration import Calibration
from app.core.versions import Version

Interconnect = Literal["nvlink", "pcie", "unknown"]


@dataclass(frozen=True)
class NonTorchTerms:
    base: int
    communicators: int
    note: str

    @property
    def total(self) -> int:
        return self.base + self.communicators


def snapshot_before_communicators(version: Version, v1: bool) -> bool:
    """Whether NCCL buffers land in non_torch (V0 always; V1 before PR #25359, taken as v0.11.0)."""
    return not v1 or version < (0, 11, 0)


def counts_whole_device(version: Version, v1: bool) -> bool:
    """Whether the row is everything outside torch's allocated bytes (no init snapshot yet)."""
    return version < (0, 9, 1) if v1 else version < (0, 6, 5)


def non_torch_terms(
    version: Version, v1: bool, world: int, interconnect: Interconnect, cal: Calibration, fusion: int = 0,
    nvls: bool = False,
) -> NonTorchTerms:  # fmt: skip
    """The non-torch row on one rank of a `world`-rank engine (tp × pp); `fusion`: the all-reduce fusion
    workspace on this rank (`allreduce_fusion_workspace_bytes`), allocated after the init snapshot;
    `nvls`: NCCL can use NVLink SHARP in the TP group (`nvls_possible`)."""
    whole = counts_whole_device(version, v1)
    base = cal.non_torch_whole if whole else cal.non_torch_v1 if v1 else cal.non_torch_v0
    what = (
        "CUDA context, kernel modules, cached torch blocks: this version counts all device memory outside "
        "torch's allocations (no init snapshot; other processes on the card would count too)"
        if whole
        else "kernel modules, cuBLAS workspaces"
    )
    if world <= 1:
        return NonTorchTerms(base, 0, f"{what} (fitted constant, see calibration)")
    if not snapshot_before_communicators(version, v1):
        return after_snapshot_terms(base, interconnect, cal, fusion, nvls)
    link = "nvlink" if interconnect == "unknown" else interconnect
    comm = cal.nccl_nvlink if link == "nvlink" else cal.nccl_pcie
    assumed = " (interconnect not given: NVLink assumed, the larger)" if interconnect == "unknown" else ""
    note = f"NCCL/custom all-reduce buffers counted before PR #25359, {link}{assumed}"
    return NonTorchTerms(base, comm, note)


def after_snapshot_terms(
    base: int, interconnect: Interconnect, cal: Calibration, fusion: int = 0, nvls: bool = False
) -> NonTorchTerms:
    """TP > 1 on V1 from PR #25359 (v0.11): what lands after the init snapshot.

    The snapshot (vllm/v1/worker/gpu_worker.py `init_device`, after
    `init_worker_distributed_environment`) holds the communicators as vLLM sets them up: pynccl's
    communicator, the custom all-reduce's IPC buffers (`CustomAllreduce.__init__`: `meta_ptrs` and
    `buffer_ptrs` of `max_size` = 8 MiB, clamped by `CUSTOM_ALL_REDUCE_MAX_SIZES` on 9.0/10.x only
    when symmetric memory is on, and an 8 MiB `rank_data`; vllm/distributed/device_communicators/
    custom_all_reduce.py @4dd49b06f) and the torch symmetric-memory buffer (`SymmMemCommunicator`,
    symm_mem.py: capability 9.0/10.x only, `SYMM_MEM_ALL_REDUCE_MAX_SIZES`, 64 MiB at TP2 on 9.0;
    "Device capability 8.0 not supported" on an A100), all created in `CudaCommunicator.__init__`
    (cuda_communicator.py). Two things come later, during the profile run, outside torch's allocator:

    - the FlashInfer all-reduce + RMSNorm fusion workspace (`fusion`, derived:
      `allreduce_fusion_workspace_bytes`);
    - NCCL's own buffers for the channels, algorithms and protocols its first large collectives of
      the dummy forward and sampler connect (`NCCL_RUNTIME_CONNECT` defaults to 1, NVIDIA/nccl
      src/init.cc): their size follows the channel count NCCL's topology search picks for the card
      and links (and NVLink SHARP from 3 ranks on NVSwitch Hopper, src/transport/nvls.cc), NCCL's
      code, not vLLM's, so not derivable here. Fitted: the median, on the v0.19 H100 NVLink logs, of the
      excess over the V1 base less the derived fusion workspace, scored leave-one-out, apart where NCCL
      can use NVLink SHARP (`Calibration.nccl_nvls`, TP4 runs: 1.89–1.93 GiB) and where it cannot
      (`Calibration.nccl_lazy_nvlink`, TP2 runs: 1.35–1.47). Applied to any NVLink (or unknown) box,
      so off H100 it is an upper bound: the one A100 TP2 log (public/65) leaves room for at most 0.15
      GiB of it.
    PCIe boxes take `nccl_pcie` (no log after v0.11 measures them) plus the fusion workspace.
    """
    link = "nvlink" if interconnect == "unknown" else interconnect
    nccl = (cal.nccl_nvls if nvls else cal.nccl_lazy_nvlink) if link == "nvlink" else cal.nccl_pcie
    assumed = " (interconnect not given: NVLink assumed, the larger)" if interconnect == "unknown" else ""
    gib = 1024**3
    fused = (f"the FlashInfer all-reduce fusion workspace {fusion / gib:.2f} GiB (derived) + " if fusion
             else "no all-reduce fusion workspace (off on this card or layout) + ")  # fmt: skip
    note = (
        "communicators are in the init snapshot since PR #25359 (v0.11); after it come " + fused
        + f"NCCL's buffers connected during the profile run {nccl / gib:.2f} GiB, {link}{assumed}"
        + (", NVLink SHARP possible" if nvls and link == "nvlink" else "") + " (NCCL's own "
        "code, not vLLM's: fitted on H100 NVLink runs, an upper bound on other cards)"
    )
    return NonTorchTerms(base, fusion + nccl, note)


# FI_ALLREDUCE_FUSION_MAX_SIZE_MB (vllm/compilation/passes/fusion/allreduce_rms_fusion.py @4dd49b06f):
# the largest input the fused all-reduce takes, by `DeviceCapability.to_int()` and TP size.
FI_FUSION_MAX_SIZE_MB: dict[int, dict[int, float]] = {
    90: {2: 64, 4: 2, 8: 0.5},
    100: {2: 64, 4: 32, 8: 1},
    103: {2: 64, 4: 64, 8: 2},
}
# `enable_allreduce_rms_fusion` became the default with addac0e65 (PR #34299, 2026-02-11): taken as v0.17.
FUSION_DEFAULT_SINCE: Version = (0, 17, 0)
_TWO_MIB = 1 << 21


def fusion_max_size_mb(
    version: Version, capability: tuple[int, int] | None, tp: int, pp: int = 1, dp: int = 1
) -> float | None:
    """The fused all-reduce's largest input (MB) where vLLM turns the fusion pass on, else None
    (`allreduce_fusion_workspace_bytes` says when; an unknown card is taken as Hopper)."""
    if tp <= 1 or pp != 1 or dp != 1 or version < FUSION_DEFAULT_SINCE:
        return None
    cap = capability or (9, 0)
    return FI_FUSION_MAX_SIZE_MB.get(cap[0] * 10 + cap[1], {}).get(tp)


def allreduce_fusion_workspace_bytes(
    version: Version, capability: tuple[int, int] | None, tp: int, pp: int, dp: int, hidden_size: int,
    dtype_bytes: int, max_num_batched_tokens: int,
) -> int:  # fmt: skip
    """The FlashInfer all-reduce + RMSNorm fusion workspace on one rank (0 where vLLM makes none).

    On: `enable_allreduce_rms_fusion` (vllm/config/vllm.py @4dd49b06f): TP > 1, CUDA with FlashInfer,
    capability 9.0 or the 10.x family, DP = PP = 1; the pass then asks `flashinfer_max_size(tp)`
    (vllm/config/compilation.py: TP 2, 4 or 8 only, the table above by capability). An unknown card is
    taken as Hopper (the larger row). Size: `AllReduceFusionPass.__init__` (allreduce_rms_fusion.py)
    sets `max_token_num = min(max_size // (hidden × dtype bytes), max_num_batched_tokens)` and
    `get_fi_ar_workspace` builds one trtllm workspace on a single node (the quant patterns reuse it,
    vllm/distributed/device_communicators/flashinfer_all_reduce.py @4dd49b06f), whose IPC buffers
    (FlashInfer `trtllm_create_ipc_workspace_for_all_reduce_fusion`, flashinfer/comm/trtllm_ar.py) are
    `tp × T × hidden × 2`, `tp × 256 × 4` flags and the Lamport triple buffer `3 × tp × T × hidden × 2`
    (× 4 for fp32), each rounded up to 2 MiB."""
    max_mb = fusion_max_size_mb(version, capability, tp, pp, dp)
    if max_mb is None:
        return 0
    tokens = min(int(max_mb * 1024 * 1024) // (hidden_size * dtype_bytes), max_num_batched_tokens)
    lamport = tp * tokens * hidden_size * (4 if dtype_bytes == 4 else 2)
    sizes = (tp * tokens * hidden_size * 2, tp * 256 * 4, 3 * lamport)
    return sum(-(-size // _TWO_MIB) * _TWO_MIB for size in sizes)


def nvls_possible(tp: int, capability: tuple[int, int] | None, interconnect: Interconnect) -> bool:
    """Whether NCCL may set up NVLink SHARP for the TP group: more than two ranks (NVIDIA/nccl
    src/transport/nvls.cc `ncclNvlsInit`, NVLS off for two or fewer GPUs) on an NVSwitch box of
    compute capability 9.0 or later (NVLink SHARP is a third-generation NVSwitch feature; an unknown
    card or interconnect is taken as one, the larger row)."""
    return tp > 2 and interconnect != "pcie" and (capability is None or capability >= (9, 0))

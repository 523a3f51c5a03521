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
    version: Version, v1: bool, world: int, interconnect: Interconnect, cal: Calibration
) -> NonTorchTerms:
    """The non-torch row on one rank of a `world`-rank engine (tp × pp)."""
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
        return after_snapshot_terms(base, interconnect, cal)
    link = "nvlink" if interconnect == "unknown" else interconnect
    comm = cal.nccl_nvlink if link == "nvlink" else cal.nccl_pcie
    assumed = " (interconnect not given: NVLink assumed, the larger)" if interconnect == "unknown" else ""
    note = f"NCCL/custom all-reduce buffers counted before PR #25359, {link}{assumed}"
    return NonTorchTerms(base, comm, note)


def after_snapshot_terms(base: int, interconnect: Interconnect, cal: Calibration) -> NonTorchTerms:
    """TP > 1 on V1 from PR #25359 (v0.11): what lands after the init snapshot.

    The snapshot (vllm/v1/worker/gpu_worker.py `init_device`, after
    `init_worker_distributed_environment`) holds the communicators as set up, but two allocations
    come later, during the profile run, outside torch's allocator:
    - the FlashInfer all-reduce+RMSNorm fusion workspace: `AllReduceFusionPass.__init__`
      (vllm/compilation/passes/fusion/allreduce_rms_fusion.py @4dd49b06f, v0.19) runs while the
      model is compiled; `enable_allreduce_rms_fusion` (vllm/config/vllm.py) turns it on by default
      at TP > 1 on SM90/SM100 with PP = DP = 1 (the v0.19 H100 logs print `fuse_allreduce_rms: True`
      at TP2/TP4 only). Its size is `FI_ALLREDUCE_FUSION_MAX_SIZE_MB[capability][tp]` (SM90:
      64/2/0.5 MB at TP2/4/8) times about 4 (FlashInfer's trtllm IPC workspace: one buffer and a
      3× Lamport buffer of `tp × max_token_num × hidden × 2` bytes): ~0.5 GiB at TP2, ~32 MiB at TP4;
    - NCCL's lazily connected channel/NVLS buffers for the dummy forward's first large all-reduce
      (NCCL's code, not vLLM's: not derivable here).
    The logs do not show the workspace's TP dependence (TP2 2.07–2.10 GiB, TP4 2.17–2.21 GiB of
    non-torch on H100), so the whole excess is one fitted constant (`Calibration.nccl_lazy_nvlink`,
    scored leave-one-out); PCIe boxes take `nccl_pcie` (no log after v0.11 measures them).
    """
    link = "nvlink" if interconnect == "unknown" else interconnect
    comm = cal.nccl_lazy_nvlink if link == "nvlink" else cal.nccl_pcie
    assumed = " (interconnect not given: NVLink assumed, the larger)" if interconnect == "unknown" else ""
    note = (
        "communicators are in the init snapshot since PR #25359 (v0.11); the all-reduce fusion workspace and "
        f"NCCL buffers connected during the profile run are not: fitted excess, {link}{assumed}"
    )
    return NonTorchTerms(base, comm, note)

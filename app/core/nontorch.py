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
        return NonTorchTerms(
            base, 0, "NCCL buffers are in the init snapshot since PR #25359 (v0.11): not counted against KV"
        )
    link = "nvlink" if interconnect == "unknown" else interconnect
    comm = cal.nccl_nvlink if link == "nvlink" else cal.nccl_pcie
    assumed = " (interconnect not given: NVLink assumed, the larger)" if interconnect == "unknown" else ""
    note = f"NCCL/custom all-reduce buffers counted before PR #25359, {link}{assumed}"
    return NonTorchTerms(base, comm, note)

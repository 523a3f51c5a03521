"""The only constants of the estimates that are fitted to measurements, and how they are fitted.

Everything else in the estimated rows is counted from vLLM's code (app.core.profile_run,
app.core.vision, app.core.cudagraphs). What the code does not determine is memory the CUDA
driver and libraries take outside torch's allocator:

- `non_torch_v0`, `non_torch_v1`: the non-torch increase over the profile run on one rank
  without communicator buffers (lazily loaded kernel modules, cuBLAS/cuBLASLt handles and
  workspaces, attention-library state). Fitted as the median of the non-torch rows logged by
  single-rank runs or runs whose snapshot already contains NCCL (V1 ≥ 0.11).
- `non_torch_whole`: the same row where vLLM counted *all* device memory outside torch's
  allocated bytes (`(total − free) − allocated_bytes.all.current` after the profile), which holds
  the CUDA context and torch's cached-but-unallocated blocks as well: V0 before PR #10511
  (`551603fef`, 2024-12-16, v0.6.5; vllm/worker/worker.py `determine_num_available_blocks`) and
  V1 before PR #18974 (`2d8476e46`, 2025-06-07, v0.9.1; vllm/v1/worker/gpu_worker.py
  `determine_available_memory`). Fitted as the median of single-rank logs of that regime; with
  none left (leave-one-out) it falls back to the larger of the two fitted bases, never to the
  in-sample value.
- `nccl_nvlink`, `nccl_pcie`: the communicator buffers NCCL and the custom all-reduce allocate at
  set-up, which V0 and V1 before PR #25359 (`abad204be`, 2025-09-23, taken as v0.11.0) counted as
  non-torch because the init snapshot was taken before `init_worker_distributed_environment`.
  NVLink/NVSwitch boxes get NVLink-SHARP buffers; PCIe boxes do not. `nccl_nvlink` is fitted as
  the median excess of logged NVLink non-torch rows at TP > 1 over the base *fitted on the same
  observations* (not over the in-sample value, so leave-one-out leaks nothing). On PCIe the excess
  was nil on every log (file 14: 0.015 GiB at TP8; public/39 and file 07 below their base), so
  PCIe multi-rank rows are pooled into the base observations and `nccl_pcie` stays 0.
- `nccl_lazy_nvlink`: from PR #25359 the init snapshot holds the communicators as set up (v0.19 TP2/TP4
  H100 logs: init non-torch 1.51–2.05 GiB against 0.51 GiB at TP1), yet the profile run still adds
  ~1.8–2.0 GiB of non-torch memory at TP > 1 that TP1 runs do not show (files 31, 32, 35, 36, 52,
  53). What vLLM allocates after the snapshot at TP > 1 is the FlashInfer all-reduce+RMSNorm
  fusion workspace (compile time, see app.core.nontorch) and whatever NCCL connects lazily on the
  first large collectives of the dummy forward. The first is derived from the config (app.core.nontorch
  `allreduce_fusion_workspace_bytes`: 0.50 GiB on the Llama-70B TP2 run, 0.35 on gpt-oss TP2, 0.03 at
  TP4, 0 off Hopper/Blackwell); the second is NCCL's, not vLLM's, code, so this term is fitted: the
  median, over the TP2 runs (31, 35, 53; 1.35–1.47 GiB), of each row's excess over the V1 base fitted on
  the same observations less its derived fusion workspace. Off H100 it is an upper bound (public/65, an
  A100 TP2 run, leaves room for at most 0.15 GiB). PCIe boxes: no log, `nccl_pcie` is used (nil on every
  PCIe log before v0.11).
- `nccl_nvls`: the same NCCL share where the TP group can use NVLink SHARP (more than two ranks on an
  NVLink Hopper/Blackwell box: NVIDIA/nccl src/transport/nvls.cc `ncclNvlsInit` leaves NVLS off for
  two or fewer GPUs): 1.89–1.93 GiB on the two H100 TP4 runs (32, 36) against 1.35–1.47 at TP2.
  Fitted the same way on those runs alone, scored leave-one-out.
- `graph_bytes` / `graph_bytes_moe`: driver memory of the instantiated CUDA graphs per captured size
  and decoder layer + 1 (app.core.cudagraphs counts the units from vLLM's code: `(piecewise + FULL
  sizes) × (layers + 1)`), beyond the pool the graphs share; mixture-of-experts models apart (more
  kernels a layer). Fitted as the median, over the logs that state a captured pool for a known model
  ("Graph capturing finished …, took X"), of `(X − pool) / units`.
- `graph_sample_bytes` and `graph_workspace`: the two terms of vLLM's own CUDA-graph estimate
  (`profile_cudagraph_memory`, app.core.cudagraphs `vllm_estimate_terms`) that its code does not fix.
  `graph_sample_bytes` is what its per-graph sample (the second-largest size's capture, read with
  `torch.cuda.mem_get_info`) costs per decoder layer + 1: the driver memory of the instantiated kernel
  nodes; fitted as the median, over the DEBUG lines "Estimated {MODE} CUDA graph memory: F MiB
  first-capture + (n-1) × P MiB per-graph" of the v0.19 logs, of `P / (layers + 1)`; mixture-of-experts
  layers (router, top-k, the fused experts: more kernel nodes a layer) get their own median,
  `graph_sample_bytes_moe` (gpt-oss, Qwen1.5-MoE, Llama-4-Scout: 0.24–0.41 MiB against 0.10–0.25 dense).
  `graph_workspace` is what the first (largest, PIECEWISE) capture reads beyond the pool tensors and
  that size's sample: the median of `F − pool − P` over the same lines (kernel workspaces that the
  capture stream allocates, e.g. cuBLAS's per-stream workspace; 30–43 MiB on the four fp8 logs, whose
  GEMMs are CUTLASS, 61–91 on the bf16 ones but gpt-oss TP1's 145: not derived from vLLM's code).

`DEFAULT` holds the in-sample fit over every real log in tests/data/vllm-logs (re-computed by
`bench/bench_estimates_loo.py`; a test asserts it still equals the fit); the leave-one-out
evaluation re-fits them without the scored log and passes them in.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

MIB = 1024**2


@dataclass(frozen=True)
class Calibration:
    non_torch_v0: int
    non_torch_v1: int
    non_torch_whole: int
    nccl_nvlink: int
    nccl_pcie: int
    graph_bytes: int
    nccl_lazy_nvlink: int = 0
    graph_sample_bytes: int = 0
    graph_workspace: int = 0
    graph_sample_bytes_moe: int = 0
    graph_bytes_moe: int = 0
    nccl_nvls: int = 0


# In-sample fit over the repository's logs (bench/bench_estimates_loo.py prints it; a test checks
# it). Where a kind has no observation left (leave-one-out), the fit falls back to these values.
DEFAULT = Calibration(
    non_torch_v0=279172874,
    non_torch_v1=268435456,
    non_torch_whole=375809638,
    nccl_nvlink=2437393941,
    nccl_pcie=0,
    graph_bytes=192996,
    nccl_lazy_nvlink=1574625608,
    graph_sample_bytes=190650,
    graph_workspace=82706432,
    graph_sample_bytes_moe=251658,
    graph_bytes_moe=404192,
    nccl_nvls=2047407554,
)


@dataclass(frozen=True)
class Observation:
    """One measured row that a constant is fitted on (bytes, plus what it depends on)."""

    # "non_torch_base_v0" | "non_torch_base_v1" | "non_torch_whole" | "nccl_nvlink" | "nccl_pcie" | "graph"
    # | "nccl_lazy_nvlink" (engine "v1") | "graph_sample" | "graph_sample_moe"
    # | "graph_workspace" | "graph_moe" | "nccl_nvls" (engine "v1")
    kind: str
    value: int
    source: str
    engine: str = ""  # nccl_nvlink: the raw row, and the base it exceeds ("v0" | "v1" | "whole")


def _median(values: list[int], default: int) -> int:
    return int(statistics.median(values)) if values else default


def fit(observations: Iterable[Observation], fallback: Calibration = DEFAULT) -> Calibration:
    """The constants as medians of the observations of each kind (the fallback where none)."""
    observations = list(observations)
    by: dict[str, list[int]] = {}
    for obs in observations:
        by.setdefault(obs.kind, []).append(obs.value)
    v0 = _median(by.get("non_torch_base_v0", []), fallback.non_torch_v0)
    v1 = _median(by.get("non_torch_base_v1", []), fallback.non_torch_v1)
    whole = _median(by.get("non_torch_whole", []), max(v0, v1))
    base = {"v0": v0, "v1": v1, "whole": whole}
    nvlink = [max(0, o.value - base.get(o.engine, 0)) for o in observations if o.kind == "nccl_nvlink"]
    lazy = [max(0, o.value - base.get(o.engine, 0)) for o in observations if o.kind == "nccl_lazy_nvlink"]
    nvls = [max(0, o.value - base.get(o.engine, 0)) for o in observations if o.kind == "nccl_nvls"]
    return Calibration(
        non_torch_v0=v0,
        non_torch_v1=v1,
        non_torch_whole=whole,
        nccl_nvlink=_median(nvlink, fallback.nccl_nvlink),
        nccl_pcie=_median(by.get("nccl_pcie", []), fallback.nccl_pcie),
        graph_bytes=_median(by.get("graph", []), fallback.graph_bytes),
        nccl_lazy_nvlink=_median(lazy, fallback.nccl_lazy_nvlink),
        graph_sample_bytes=_median(by.get("graph_sample", []), fallback.graph_sample_bytes),
        graph_workspace=_median(by.get("graph_workspace", []), fallback.graph_workspace),
        graph_sample_bytes_moe=_median(by.get("graph_sample_moe", []), fallback.graph_sample_bytes_moe),
        graph_bytes_moe=_median(by.get("graph_moe", []), fallback.graph_bytes_moe),
        nccl_nvls=_median(nvls, fallback.nccl_nvls),
    )

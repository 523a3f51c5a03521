"""The only constants of the estimates that are fitted to measurements, and how they are fitted.

Everything else in the estimated rows is counted from vLLM's code (app.core.profile_run,
app.core.vision, app.core.cudagraphs). What the code does not determine is memory the CUDA
driver and libraries take outside torch's allocator:

- `non_torch_v0`, `non_torch_v1`: the non-torch increase over the profile run on one rank
  without communicator buffers (lazily loaded kernel modules, cuBLAS/cuBLASLt handles and
  workspaces, attention-library state). Fitted as the median of the non-torch rows logged by
  single-rank runs or runs whose snapshot already contains NCCL (V1 ≥ 0.11).
- `nccl_nvlink`, `nccl_pcie`: the communicator buffers NCCL and the custom all-reduce allocate at
  set-up, which V0 and V1 before PR #25359 (`abad204be`, 2025-09-23, taken as v0.11.0) counted as
  non-torch because the init snapshot was taken before `init_worker_distributed_environment`.
  NVLink/NVSwitch boxes get NVLink-SHARP buffers; PCIe boxes do not. Fitted as the median excess
  of logged non-torch rows over the base at TP > 1.
- `graph_bytes_per_layer`: driver memory of one captured CUDA graph per decoder layer on the rank
  (kernel nodes and their parameters), beyond the activations of the largest graph. Fitted as the
  median over logs that state a graph pool.

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
    nccl_nvlink: int
    nccl_pcie: int
    graph_bytes_per_layer: int


# In-sample fit over the repository's logs (bench/bench_estimates_loo.py prints it; a test checks
# it). Where a kind has no observation left (leave-one-out), the fit falls back to these values.
DEFAULT = Calibration(
    non_torch_v0=375809638,
    non_torch_v1=209715200,
    nccl_nvlink=2340757177,
    nccl_pcie=0,
    graph_bytes_per_layer=587614,
)


@dataclass(frozen=True)
class Observation:
    """One measured row that a constant is fitted on (bytes, plus what it depends on)."""

    kind: str  # "non_torch_base_v0" | "non_torch_base_v1" | "nccl_nvlink" | "nccl_pcie" | "graph_per_layer"
    value: int
    source: str


def _median(values: list[int], default: int) -> int:
    return int(statistics.median(values)) if values else default


def fit(observations: Iterable[Observation], fallback: Calibration = DEFAULT) -> Calibration:
    """The constants as medians of the observations of each kind (the fallback where none)."""
    by: dict[str, list[int]] = {}
    for obs in observations:
        by.setdefault(obs.kind, []).append(obs.value)
    return Calibration(
        non_torch_v0=_median(by.get("non_torch_base_v0", []), fallback.non_torch_v0),
        non_torch_v1=_median(by.get("non_torch_base_v1", []), fallback.non_torch_v1),
        nccl_nvlink=_median(by.get("nccl_nvlink", []), fallback.nccl_nvlink),
        nccl_pcie=_median(by.get("nccl_pcie", []), fallback.nccl_pcie),
        graph_bytes_per_layer=_median(by.get("graph_per_layer", []), fallback.graph_bytes_per_layer),
    )

"""The "cuda_graphs" row: which batch sizes vLLM captures per version, and what the graphs cost.

Capture sizes (the default candidate list, filtered by the limits):
- V0 (`VllmConfig._set_cudagraph_sizes`, vllm/config.py, `not envs.VLLM_USE_V1` branch):
  `[1, 2, 4] + [8·i]` up to the first size ≥ max_num_seqs (35 sizes at 256 sequences).
- V1 until v0.9 (`SchedulerConfig.cuda_graph_sizes = [512]`): `[1, 2, 4] + range(8, 513, 8)`.
- V1 from PR #20628 (`34dad19e7`, 2025-07-09, v0.10.0): `[1, 2, 4] + range(8, M + 1, 8)` with
  `M = min(2·max_num_seqs, 512)` (67 sizes at 256 sequences).
- V1 from PR #26016 (`284cc9227`, 2025-10-24, v0.11.1; vllm/config/vllm.py `_set_cudagraph_sizes`
  @28be48fa): `[1, 2, 4] + range(8, 256, 8) + range(256, M + 1, 16)`, `M = min(2·max_num_seqs,
  512, max_num_batched_tokens)`, plus max_num_batched_tokens itself when it is ≤ M (51 sizes).
- cudagraph_mode: PIECEWISE by default until PR #25444 (`24fab45d9`, 2025-09-23, v0.11.0), then
  FULL_AND_PIECEWISE: piecewise graphs for every size plus FULL decode graphs for the sizes
  ≤ max_num_seqs (uniform decode batches; file 18 logs 35 full + 67 piecewise).

Cost: `profile_cudagraph_memory` (gpu_model_runner.py @28be48fa) estimates a mode as
`first + per_graph × (n − 1)`; FULL and PIECEWISE share one pool, so the total is the largest
`first` plus every other graph's `per_graph`. Here `first` is the activations of the largest
captured batch (the graph pool keeps them: the dummy forward's per-token peak × size) and
`per_graph` the driver memory of one graph's kernel nodes, `Calibration.graph_bytes_per_layer`
per decoder layer on the rank (fitted, see calibration). Zero with enforce_eager or mode NONE.
Where the row sits: outside the KV budget before v0.21 (captured after KV sizing), inside from
v0.21 (the estimate is subtracted; `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1`, PR #38284).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.core.calibration import Calibration
from app.core.versions import Version

CudagraphMode = Literal["auto", "NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]


def capture_sizes(version: Version, v1: bool, max_num_seqs: int, max_num_batched_tokens: int) -> tuple[int, ...]:
    """The batch sizes vLLM captures by default (see the module docstring)."""
    if not v1:
        top = next((s for s in [1, 2, 4, *range(8, 8193, 8)] if s >= max_num_seqs), 8192)
        return tuple(s for s in [1, 2, 4, *range(8, 8193, 8)] if s <= top)
    if version < (0, 10, 0):
        sizes = [1, 2, 4, *range(8, 513, 8)]
    elif version < (0, 11, 1):
        sizes = [1, 2, 4, *range(8, min(2 * max_num_seqs, 512) + 1, 8)]
    else:
        top = min(2 * max_num_seqs, 512, max_num_batched_tokens)
        sizes = [s for s in (1, 2, 4) if s <= top]
        sizes += list(range(8, min(top + 1, 256), 8)) if top >= 8 else []
        sizes += list(range(256, top + 1, 16)) if top >= 256 else []
        if max_num_batched_tokens <= top:
            sizes.append(max_num_batched_tokens)
    return tuple(sorted({s for s in sizes if s <= max_num_batched_tokens}))


def resolved_mode(version: Version, v1: bool, mode: CudagraphMode, enforce_eager: bool) -> CudagraphMode:
    """The cudagraph_mode in force ("auto": the version's default)."""
    if enforce_eager or mode == "NONE":
        return "NONE"
    if mode != "auto":
        return mode
    if not v1:
        return "FULL"  # V0 captures whole decode graphs
    return "FULL_AND_PIECEWISE" if version >= (0, 11, 0) else "PIECEWISE"


@dataclass(frozen=True)
class GraphTerms:
    mode: CudagraphMode
    piecewise: int
    full: int
    first_bytes: int
    per_graph_bytes: int
    total: int
    note: str


def graph_terms(
    version: Version, v1: bool, mode: CudagraphMode, enforce_eager: bool, max_num_seqs: int,
    max_num_batched_tokens: int, layers_on_rank: int, forward_bytes_per_token: int, cal: Calibration,
) -> GraphTerms:  # fmt: skip
    """The CUDA-graph pool on one rank."""
    mode = resolved_mode(version, v1, mode, enforce_eager)
    if mode == "NONE":
        why = "enforce_eager" if enforce_eager else "cudagraph_mode NONE"
        return GraphTerms("NONE", 0, 0, 0, 0, 0, f"no CUDA graphs ({why})")
    sizes = capture_sizes(version, v1, max_num_seqs, max_num_batched_tokens)
    decode = tuple(s for s in sizes if s <= max_num_seqs)
    piecewise = len(sizes) if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") else 0
    full = {"FULL": len(sizes), "FULL_DECODE_ONLY": len(decode), "FULL_AND_PIECEWISE": len(decode)}.get(mode, 0)
    n = piecewise + full
    first = max(sizes, default=0) * forward_bytes_per_token
    per_graph = cal.graph_bytes_per_layer * layers_on_rank
    total = first + per_graph * max(0, n - 1) if n else 0
    note = f"{mode}: {piecewise} piecewise + {full} full graphs (largest {max(sizes, default=0)})"
    return GraphTerms(mode, piecewise, full, first, per_graph, total, note)

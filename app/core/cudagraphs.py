"""The "cuda_graphs" row: which batch sizes vLLM captures per version, how many CUDA graphs that
makes, and what the graph pool costs.

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

How many CUDA graphs one capture size makes (what the driver memory scales with):
- PIECEWISE: `split_graph` (vllm/compilation/backends.py @28be48fa; since PR #9715, `ff5ed6e1b`)
  cuts the model's FX graph at every splitting op — one per decoder layer
  (`CompilationConfig._attention_ops`: unified attention, MLA, the Mamba/GDN/linear-attention
  mixers; vllm/config/compilation.py @15b8fef45 and @28be48fa) — and `wrap_with_cudagraph_if_needed`
  wraps each of the `layers + 1` pieces between them in its own `CUDAGraphWrapper`: `layers + 1`
  CUDA graphs per size.
- FULL (V1 FULL/FULL_DECODE_ONLY/the FULL half of FULL_AND_PIECEWISE, and V0's
  `CUDAGraphRunner`): one CUDA graph of the whole forward per size.

Cost. All graphs of a rank capture into one memory pool, largest size first, so the pool's
tensors are those of the largest capture (its intermediates are freed back into the pool and
reused by every smaller capture): `pool = largest size × the dummy forward's per-token peak`. On
top, each instantiated CUDA graph holds driver memory of its own (its kernel nodes and their
parameters), not shared. What that scales with is the kernels captured, not the number of graph
objects: a piecewise size captures the forward's kernels split over `layers + 1` graphs, a FULL size
captures the same kernels (and the attention's) in one graph (`CUDAGraphWrapper` around the whole
model, vllm/v1/worker/gpu_model_runner.py @4dd49b06f; V0's `CUDAGraphRunner` around the decode
forward, vllm/worker/model_runner.py), and vLLM's own per-size samples of both modes agree within
2 MiB on 14 of the 17 v0.19 logs that print both (app.core.calibration `graph_sample_bytes`). So the
row pays `Calibration.graph_bytes` per captured size per decoder layer + 1 ("units": `(piecewise +
full sizes) × (layers + 1)`), fitted on the logged pools. Counted so, the logs agree: 0.17–0.21 MiB a
unit on the 13 dense v0.19 H100 logs and 0.17 on the one V0 log (file 41, Phi-4, whose 6.94 MiB a
whole-model graph was 17× the per-graph figure when a FULL graph counted as one graph), the magnitude
of vLLM's own per-size sample per layer (0.18). Mixture-of-experts layers launch more kernels a layer
(router, top-k, the expert GEMMs and their routing/align kernels, the combine) and capture more
memory per unit: 0.31–0.55 MiB (gpt-oss 0.31–0.32, Qwen1.5-MoE, Qwen3-VL-30B-A3B, Llama-4-Scout,
Qwen3-235B; Qwen3-Next's hybrid 0.73), `Calibration.graph_bytes_moe`, fitted on those logs alone. Not
derived: how much driver memory a kernel node takes (the sampled figures move in 2 MiB steps). gpt-oss's
captures end with 626 / 318 MiB cached in the graph pool at TP1 / TP2 (logs 38 / 53: the OOM line's
"allocated in private pools" is the pool's free list, PyTorch's CUDACachingAllocator), which the largest
size's forward tensors (35 / 32 MiB) do not explain; FA3's split accumulators at the largest FULL size do
(520 / 260 MiB; `uses_fa3`): counted in the captured pool since stop 29. The range over the logs is
`GRAPH_BYTES_RANGE_MIB`; the one A100 log and the v0.7.3 V1 log sit at 0.77 and 0.91 MiB a unit.
- Before v0.21 the row is what `capture_model` measured ("Graph capturing finished …, took X",
  `free_before − free_after`): `pool + units × graph_bytes`, allocated after KV sizing, out of the
  `1 − gpu_memory_utilization` headroom.
- From v0.21 (`VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1` by default, PR #38284, `96a85c575`, 2026-04-21;
  the log's advice reads "This will become the default in v0.21" from `ab5666eb7`, and "default since
  v0.21.0" after; opt-in since PR #30515, `ebb9cc5f2`, v0.18: the plan's `engine.estimate_cudagraphs`,
  app.core.versions `with_cudagraph_estimate`) the KV budget subtracts vLLM's own estimate,
  `profile_cudagraph_memory` (vllm/v1/worker/gpu_model_runner.py @4dd49b06f, the same at @28be48fa9),
  which `vllm_estimate` replays term by term: it captures the two largest sizes of each mode into a
  temporary pool and extrapolates the second one's `mem_get_info` delta to the other sizes. What the
  code fixes is derived (the sizes, the counts, the modes' order and shared pool, the pool tensors, FA3's
  accumulators, the 1 MiB floor); what it measures of the driver is not: the per-size sample (the
  instantiated graphs' kernel nodes) and the first capture's kernel workspaces are fitted on the v0.19
  DEBUG lines (app.core.calibration) and scored leave-one-out (bench/estimate_graph_budget.py). The
  sample depends on the card and driver as well (the one A100 log's estimate is 3.5× the H100 rule's,
  no DEBUG line to split it), so the row cannot be predicted from the config alone off H100s. Model
  Runner V2 (vllm/v1/worker/gpu/model_runner.py) returns 0 for the estimate; not modelled.
FlashAttention 3's split-KV accumulators (FULL graphs on Hopper): with FULL CUDA graphs and FA3
(`get_flash_attn_version() == 3` needs compute capability 9.x, vllm/v1/attention/backends/fa_utils.py
@4dd49b06f), `FlashAttentionMetadataBuilder.__init__` fixes `max_num_splits =
flash_attn_max_num_splits_for_cuda_graph` (32, vllm/config/attention.py; since PR #20301, `8acb4bade`,
2025-07-01) so that the kernel's intermediate buffers `[num_splits, num_heads, num_tokens, head_size]`
(fp32 out_accum, plus the fp32 softmax_lse_accum without head_size) are allocated during capture: at
the largest FULL size they join the pool, beside the tensors the piecewise captures left (the v0.19
DEBUG lines log a FULL first capture of 256 + 4 MiB for 32 heads × 128 at 512 tokens, 128 + 6 for 16
heads, 224 + 4 for 28 heads; 4–8 MiB where FA3 is not the backend). FA3 is not the backend for
fp32 (`supported_dtypes`), head sizes that are not a multiple of 8 or above 256 (`supports_head_size`),
MLA, and mm-prefix models (`supports_mm_prefix` is False; `ModelConfig.is_mm_prefix_lm`,
vllm/config/model.py: model_type gemma3, paligemma, …). gpt-oss runs FA3 on Hopper (its attention sinks
need it) with the split count fixed all the same, so its captured pool holds the accumulators (the OOM
lines of logs 38 / 53 bear it out); only vLLM's own estimate of it logs none (DEBUG lines of 35, 38: a
FULL first capture of 6–8 MiB), an exception taken from those logs and kept for the estimate alone.
Zero with enforce_eager or cudagraph_mode NONE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.core.calibration import Calibration
from app.core.versions import Version

CudagraphMode = Literal["auto", "NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]


def max_capture_size(architecture: str | None, version: Version) -> int:
    """The largest default capture size: 512, but 1024 for gpt-oss from its release (v0.10.1):
    `GptOssForCausalLMConfig.verify_and_update_config` (vllm/model_executor/models/config.py, since
    PR #22327, `de98252f4`, 2025-08-05) sets `max_cudagraph_capture_size = 1024` unless the user
    set the capture sizes (file 35 logs PIECEWISE=83 (largest=1024))."""
    return 1024 if architecture == "GptOssForCausalLM" and version >= (0, 10, 1) else 512


def capture_sizes(
    version: Version, v1: bool, max_num_seqs: int, max_num_batched_tokens: int, max_size: int = 512
) -> tuple[int, ...]:
    """The batch sizes vLLM captures by default (see the module docstring; `max_size` replaces 512)."""
    if not v1:
        top = next((s for s in [1, 2, 4, *range(8, 8193, 8)] if s >= max_num_seqs), 8192)
        return tuple(s for s in [1, 2, 4, *range(8, 8193, 8)] if s <= top)
    if version < (0, 10, 0):
        sizes = [1, 2, 4, *range(8, 513, 8)]
    elif version < (0, 11, 1):
        sizes = [1, 2, 4, *range(8, min(2 * max_num_seqs, max_size) + 1, 8)]
    else:
        top = min(2 * max_num_seqs, max_size, max_num_batched_tokens)
        sizes = [s for s in (1, 2, 4) if s <= top]
        sizes += list(range(8, min(top + 1, 256), 8)) if top >= 8 else []
        sizes += list(range(256, top + 1, 16)) if top >= 256 else []
        if max_num_batched_tokens <= top:
            sizes.append(max_num_batched_tokens)
    return tuple(sorted({s for s in sizes if s <= max_num_batched_tokens}))


def resolved_mode(
    version: Version, v1: bool, mode: CudagraphMode, enforce_eager: bool, chunked_attention: bool = False
) -> CudagraphMode:
    """The cudagraph_mode in force ("auto": the version's default). Chunked local attention (Llama-4)
    has no FULL graphs: its builder's `get_cudagraph_support` is NEVER (PR #26034, `4134312b3`,
    2025-10-01, taken from v0.11.1; vllm/model_executor/layers/attention/chunked_local_attention.py
    @4dd49b06f), and `_check_and_update_cudagraph_mode` (gpu_model_runner.py @4dd49b06f) then sets
    FULL_AND_PIECEWISE to PIECEWISE "because attention is compiled piecewise" (log 36: PIECEWISE=51 only)."""
    if enforce_eager or mode == "NONE":
        return "NONE"
    if mode != "auto":
        return mode
    if not v1:
        return "FULL"  # V0 captures whole decode graphs
    if version < (0, 11, 0) or (chunked_attention and version >= (0, 11, 1)):
        return "PIECEWISE"
    return "FULL_AND_PIECEWISE"


# AttentionConfig.flash_attn_max_num_splits_for_cuda_graph (vllm/config/attention.py @4dd49b06f).
FA3_SPLITS_FOR_CUDA_GRAPH = 32
# ModelConfig.is_mm_prefix_lm's model types (vllm/config/model.py @4dd49b06f): bidirectional mm spans.
MM_PREFIX_LM_MODEL_TYPES = ("bagel", "gemma3", "molmo2", "paligemma", "umm")


@dataclass(frozen=True)
class AttentionFacts:
    """What picks the FULL graphs' attention backend on one rank (see the module docstring)."""

    capability: tuple[int, int] | None  # the card's compute capability; None: not known
    dtype: str
    head_dim: int
    heads_per_rank: int
    model_type: str | None = None
    architecture: str | None = None
    mla: bool = False


def uses_fa3(facts: AttentionFacts, version: Version, v1: bool, profiled: bool = True) -> bool:
    """Whether FULL graphs run FlashAttention 3 with fixed splits (PR #20301, v0.10.0, on 9.x cards).

    `profiled`: in vLLM's own estimate (`profile_cudagraph_memory`). gpt-oss is the one exception there:
    its v0.19 DEBUG lines log a FULL first capture of 6–8 MiB at 1,024 tokens, no accumulator, and why is
    not derived. In the capture itself (`capture_model`) the code's rule holds for gpt-oss too: it runs
    FlashAttention on Hopper (its sinks need `flash_attn_supports_sinks`, FA3; FLASH_ATTN heads CUDA's
    backend priorities), and `FlashAttentionMetadataBuilder` (vllm/v1/attention/backends/flash_attn.py
    @4dd49b06f) fixes `max_num_splits = 32` in `__init__` whenever FA3 and FULL graphs are on — gpt-oss's
    mix of sliding and full layers turns off only the AOT scheduler at the first `build`, not the split
    count, which `build` passes for every batch up to the largest capture size. The captured pools agree:
    the OOM lines of logs 38 / 53 report 626 / 318 MiB cached in the graph pool at TP1 / TP2, against the
    largest size's tensors (35 / 32 MiB) plus these accumulators (520 / 260 MiB)."""
    return (
        v1 and version >= (0, 10, 0) and facts.capability is not None and facts.capability[0] == 9
        and facts.dtype in ("float16", "bfloat16") and facts.head_dim % 8 == 0 and facts.head_dim <= 256
        and not facts.mla and facts.model_type not in MM_PREFIX_LM_MODEL_TYPES
        and not (profiled and facts.architecture == "GptOssForCausalLM")
    )  # fmt: skip


def fa3_split_accum_bytes(
    facts: AttentionFacts | None, version: Version, v1: bool, full_tokens: int, profiled: bool = True
) -> int:
    """FA3's fp32 out_accum [splits, heads, tokens, head_dim] and softmax_lse_accum [splits, heads, tokens]
    at the largest FULL capture size; 0 where FA3 is not the FULL graphs' backend (`uses_fa3`)."""
    if facts is None or full_tokens == 0 or not uses_fa3(facts, version, v1, profiled):
        return 0
    return FA3_SPLITS_FOR_CUDA_GRAPH * facts.heads_per_rank * full_tokens * (facts.head_dim + 1) * 4


MIB = 1024**2
# Driver memory per captured size and layer + 1 that the logged pools imply (bench/bench_estimates_loo.py
# `graph_observation`, dense and MoE); a test keeps it equal to the observations.
GRAPH_BYTES_RANGE_MIB = (0.17, 0.91)


@dataclass(frozen=True)
class GraphTerms:
    mode: CudagraphMode
    piecewise: int  # piecewise capture sizes
    full: int  # FULL capture sizes
    pieces: int  # CUDA graphs per piecewise size (layers on the rank + 1)
    cuda_graphs: int  # CUDA graphs the row pays driver memory for
    pool_bytes: int  # the largest capture's tensors
    per_graph_bytes: int  # driver memory per unit (Calibration.graph_bytes, graph_bytes_moe for MoE layers)
    total: int
    note: str
    piecewise_pool: int = 0  # the largest piecewise capture's tensors alone
    units: int = 0  # captured sizes × (layers + 1): what the driver memory scales with (module docstring)


def estimate_per_graph(layers_on_rank: int, cal: Calibration, moe: bool = False) -> int:
    """vLLM's per-graph sample: `(layers + 1) × graph_sample_bytes` (the MoE figure for MoE layers), ≥ 1 MiB."""
    return max((layers_on_rank + 1) * (cal.graph_sample_bytes_moe if moe else cal.graph_sample_bytes), MIB)


def vllm_estimate(pool: dict[str, int], counts: dict[str, int], layers_on_rank: int, cal: Calibration,
                  moe: bool = False) -> int:  # fmt: skip
    """`profile_cudagraph_memory` (vllm/v1/worker/gpu_model_runner.py @4dd49b06f, unchanged to @28be48fa9),
    term by term; `pool[mode]` is what that mode's largest capture adds to the shared profiling pool.
    - Modes in `CudagraphDispatcher.get_capture_descs` order, PIECEWISE then FULL, sizes largest first
      (vllm/v1/cudagraph_dispatcher.py @4dd49b06f); per mode it captures `descs[:2]` and reads each
      with `torch.cuda.mem_get_info()` (driver view: new allocator segments + graph instantiations).
    - `per_graph = max(sample of the second size, 1 MiB)` ("at least 1 MiB per graph"): that size's
      tensors fit in the pool its larger sibling left, so the sample is the instantiated graphs' driver
      memory, `(layers + 1) × graph_sample_bytes` (fitted, MoE layers apart; a FULL graph holds the same
      kernel nodes the `layers + 1` pieces split: the v0.19 samples of both modes agree within 2 MiB on
      14 of the 17 logs that state both).
    - The FULL mode's first capture runs its warm-ups with `profile_seq_lens = min(max_model_len,
      max_num_tokens // size)` so that seq-len-sized attention buffers reach their largest; FA3's split
      accumulators (the one such buffer derived here, app.core.cudagraphs `fa3_split_accum_bytes`) do not
      depend on it.
    - `first = pool + per_graph`, plus, on the first capture of all (PIECEWISE where captured), the
      kernel workspaces the capture stream allocates (`graph_workspace`, fitted): `torch.accelerator
      .empty_cache()` just before the loop puts them back on the driver's count.
    - `total = max(first over modes) + Σ per_graph × (n − 1)`: "FULL and PIECEWISE graphs share the
      global pool … Take the max to avoid double-counting the overlap"."""
    per = estimate_per_graph(layers_on_rank, cal, moe)
    modes = [m for m in ("PIECEWISE", "FULL") if counts.get(m)]
    firsts = [pool[m] + per + (cal.graph_workspace if i == 0 else 0) for i, m in enumerate(modes)]
    return max(firsts, default=0) + sum(per * (counts[m] - 1) for m in modes)


def _off_hopper(attention: AttentionFacts | None) -> str:
    """What the note says where the fitted driver terms (H100 logs) do not carry over."""
    capability = attention.capability if attention is not None else None
    if capability is not None and capability[0] == 9:
        return ""
    return (
        "; the sample and the workspaces are what vLLM reads of the driver, not predictable from the "
        "config: fitted on H100 logs, and the one A100 log's estimate (Qwen3-8B, v0.19.1) is 3.5× this rule"
    )


def graph_terms(
    version: Version, v1: bool, mode: CudagraphMode, enforce_eager: bool, max_num_seqs: int,
    max_num_batched_tokens: int, layers_on_rank: int, forward_bytes_per_token: int, cal: Calibration,
    max_size: int = 512, attention: AttentionFacts | None = None, in_budget: bool | None = None,
    moe: bool = False, chunked_attention: bool = False, dequant: tuple[int, int] = (0, 0),
) -> GraphTerms:  # fmt: skip
    """The CUDA-graph row on one rank (see the module docstring); `in_budget`: whether the KV budget
    subtracts vLLM's estimate (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; None: the version's default, v0.21);
    `dequant`: (bytes, from how many tokens) of the dequantized weight the plain AWQ/GPTQ kernels hold inside
    a forward (app.core.dequant_linear): a capture of that many tokens or more holds it in the pool too."""
    mode = resolved_mode(version, v1, mode, enforce_eager, chunked_attention)
    if mode == "NONE":
        why = "enforce_eager" if enforce_eager else "cudagraph_mode NONE"
        return GraphTerms("NONE", 0, 0, 0, 0, 0, 0, 0, f"no CUDA graphs ({why})")
    sizes = capture_sizes(version, v1, max_num_seqs, max_num_batched_tokens, max_size)
    decode = tuple(s for s in sizes if s <= max_num_seqs)
    piecewise = len(sizes) if mode in ("PIECEWISE", "FULL_AND_PIECEWISE") else 0
    full_sizes = {"FULL": sizes, "FULL_DECODE_ONLY": decode, "FULL_AND_PIECEWISE": decode}.get(mode, ())
    full = len(full_sizes)
    pieces = layers_on_rank + 1 if v1 else 1
    graphs = piecewise * pieces + full
    units = (piecewise + full) * (layers_on_rank + 1)
    c = cal.graph_bytes_moe if moe and cal.graph_bytes_moe else cal.graph_bytes
    held, from_tokens = dequant

    def tensors(tokens: int) -> int:
        return tokens * forward_bytes_per_token + (held if held and tokens >= max(1, from_tokens) else 0)

    pool = {"PIECEWISE": tensors(max(sizes, default=0)) if piecewise else 0,
            "FULL": tensors(max(full_sizes, default=0)) if full_sizes else 0}  # fmt: skip
    estimated = version >= (0, 21, 0) if in_budget is None else in_budget
    accum = fa3_split_accum_bytes(attention, version, v1, max(full_sizes, default=0), profiled=estimated)
    # FULL captures after PIECEWISE into the same pool: they add the FA3 accumulators and what of
    # their tensors the piecewise captures did not leave (module docstring).
    pool["FULL"] = max(0, pool["FULL"] - pool["PIECEWISE"]) + accum if full else 0
    largest = pool["PIECEWISE"] + pool["FULL"]
    counts = {"PIECEWISE": piecewise, "FULL": full}
    if estimated:
        total = vllm_estimate(pool, counts, layers_on_rank, cal, moe)
        per = estimate_per_graph(layers_on_rank, cal, moe) / MIB
        sample = cal.graph_sample_bytes_moe if moe else cal.graph_sample_bytes
        why = ("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default since v0.21.0 (PR #38284)"
               if version >= (0, 21, 0) else "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 set")  # fmt: skip
        how = (f"vLLM's estimate (profile_cudagraph_memory), inside the KV budget ({why}): max(first captures) + "
               f"({piecewise} − 1 piecewise, {full} − 1 full) × {per:.1f} MiB a size ({layers_on_rank} layers + 1 "
               f"× {sample / MIB:.2f} MiB{' (MoE)' if moe else ''}, fitted), the first with "
               f"{cal.graph_workspace / MIB:.0f} MiB of kernel workspaces (fitted)"
               + _off_hopper(attention))  # fmt: skip
    else:
        total = largest + units * c
        how = "captured after KV sizing, outside the budget"
    lo, hi = GRAPH_BYTES_RANGE_MIB
    note = (f"{mode}: {piecewise} piecewise sizes × {pieces} graphs + {full} full = {graphs:,} CUDA graphs; "
            f"driver memory for {piecewise + full} sizes × {layers_on_rank + 1} (layers + 1) = {units:,} units × "
            f"{c / MIB:.2f} MiB{' (MoE layers)' if moe else ''} (fitted; the logs imply {lo}–{hi}) + the largest "
            f"size's ({max(sizes, default=0)}) tensors {largest / MIB:,.0f} MiB"
            + (f" (FA3 split accumulators {accum / MIB:,.0f} MiB)" if accum else "") + f"; {how}")  # fmt: skip
    return GraphTerms(mode, piecewise, full, pieces, graphs, largest, c, total, note, pool["PIECEWISE"], units)

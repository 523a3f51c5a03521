"""Torch blocks the Marlin repack of GPTQ / AWQ checkpoints leaves cached, which the versions that
count all device memory outside torch's allocated bytes (V0 before v0.6.5, V1 before v0.9.1:
app.core.nontorch `counts_whole_device`) report as non-torch memory.

What vLLM does (v0.6.4, `4f168f69a`): the model is built on the device, so every parameter is
allocated at construction, layer by layer (`GPTQMarlinLinearMethod.create_weights`,
vllm/model_executor/layers/quantization/gptq_marlin.py: `qweight` [K/8, N] int32, `g_idx` [K] int32,
`qzeros` [K/g, N/8] int32, `scales` [K/g, N] fp16; `AWQMarlinLinearMethod`: qweight, qzeros, scales).
After loading, `process_weights_after_loading` walks the modules in order and, per linear layer
(`MarlinLinearKernel.process_weights_after_loading`, kernels/marlin.py; `AWQMarlinLinearMethod`):

- allocates the Marlin workspace (`marlin_make_workspace`: N / 64 × 16 int32, marlin_utils.py) and
  replaces `g_idx` (without act-order) and, for symmetric GPTQ, `qzeros` by empty tensors: the old
  ones are freed;
- `gptq_marlin_repack` / `awq_marlin_repack` returns a new tensor of the qweight's size while the old
  one is alive (the load's transient peak: one qweight), then the old is freed;
- `marlin_permute_scales` (an indexing copy) and, for AWQ, `awq_to_marlin_zero_points` do the same
  for the scales and zero points.

"Model loading took" is allocated bytes after minus before (`DeviceMemoryProfiler`), so neither the
transient nor the freed blocks are in the weights figure, and V0 resets the peak before its profile
(`determine_num_available_blocks`, vllm/worker/worker.py). What stays is fragmentation: a freed block
that a later, smaller tensor was split out of cannot be returned by `torch.cuda.empty_cache()`, which
releases only segments with nothing allocated in them. That is replayed here with the PyTorch caching
allocator's rules (c10/cuda/CUDACachingAllocator.cpp, torch 2.5, large pool; requests ≤ 1 MiB go to
the small pool and are left out, a few MiB at most): sizes rounded to 512 B; a request takes the
smallest cached block that holds it (`get_free_block`, best fit) and splits off the rest when more
than 1 MiB remains (`should_split`); otherwise a new segment of 20 MiB for requests under 10 MiB
(`kLargeBuffer`), else the request rounded to 2 MiB (`get_allocation_size`); a free merges with free
neighbours in its segment.

Checked against a run it was not derived from: Qwen2.5-32B-Instruct-AWQ on an A6000, v0.6.4.post1
(vLLM issue #10360, comment of 2024-11-30): non_torch_memory 0.44 GiB against the 0.35 GiB of the
fitted whole-device base; the replay gives 0.10 GiB. Experts (fused Marlin MoE) are not replayed.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from app.core.weights_tensor import Geometry, Tensor, Version, WeightsModel, pp_layer_split, shape_on_rank

MIB = 1024**2
K_SMALL_SIZE = MIB  # kSmallSize: larger requests use the large pool
K_MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc
K_LARGE_BUFFER = 20 * MIB  # kLargeBuffer: the segment of a 1–10 MiB request
K_ROUND_LARGE = 2 * MIB  # kRoundLarge


@dataclass(frozen=True)
class MarlinLinear:
    """One quantized linear layer on a rank: input K, output N, the checkpoint's format."""

    k: int
    n: int
    bits: int
    group: int
    awq: bool = False

    def construction(self) -> tuple[tuple[str, int], ...]:
        """The tensors `create_weights` allocates, in order (bytes)."""
        g = self.group if 0 < self.group < self.k else self.k
        q, groups = self.k * self.n * self.bits // 8, self.k // g
        zeros, scales = groups * self.n * self.bits // 8, groups * self.n * 2
        if self.awq:
            return (("qweight", q), ("qzeros", zeros), ("scales", scales))
        return (("qweight", q), ("g_idx", self.k * 4), ("qzeros", zeros), ("scales", scales))

    def processing(self) -> tuple[tuple[str, str], ...]:
        """`process_weights_after_loading`'s (action, tensor) steps: "free", or "replace" (new, then free old)."""
        if self.awq:
            return (("replace", "qweight"), ("replace", "scales"), ("replace", "qzeros"))
        return (("free", "g_idx"), ("free", "qzeros"), ("replace", "qweight"), ("replace", "scales"))


class CachingAllocator:
    """The large pool of PyTorch's caching allocator (see the module docstring)."""

    def __init__(self) -> None:
        self._free: list[tuple[int, int, int]] = []  # (size, segment, offset), sorted: best fit first
        self._blocks: dict[int, dict[int, tuple[int, bool]]] = {}  # segment → offset → (size, allocated)
        self._live: dict[object, tuple[int, int]] = {}

    def malloc(self, key: object, nbytes: int) -> None:
        size = max(512, -(-nbytes // 512) * 512)
        if size <= K_SMALL_SIZE:
            return
        i = bisect.bisect_left(self._free, (size, -1, -1))
        if i < len(self._free):
            block, seg, off = self._free.pop(i)
        else:
            seg, off = len(self._blocks), 0
            block = K_LARGE_BUFFER if size < K_MIN_LARGE_ALLOC else -(-size // K_ROUND_LARGE) * K_ROUND_LARGE
            self._blocks[seg] = {}
        if block - size > K_SMALL_SIZE:
            self._blocks[seg][off + size] = (block - size, False)
            bisect.insort(self._free, (block - size, seg, off + size))
            block = size
        self._blocks[seg][off] = (block, True)
        self._live[key] = (seg, off)

    def free(self, key: object) -> None:
        if key not in self._live:
            return
        seg, off = self._live.pop(key)
        blocks = self._blocks[seg]
        size, _ = blocks.pop(off)
        for o, (s, used) in list(blocks.items()):  # merge with free neighbours
            if not used and (o + s == off or o == off + size):
                del blocks[o]
                self._free.remove((s, seg, o))
                off, size = min(o, off), size + s
        blocks[off] = (size, False)
        bisect.insort(self._free, (size, seg, off))

    def cached_in_used_segments(self) -> int:
        """Free bytes `empty_cache` cannot release: free blocks in segments that hold an allocation."""
        return sum(
            sum(s for s, used in blocks.values() if not used)
            for blocks in self._blocks.values()
            if any(used for _, used in blocks.values())
        )


def repack_cached_bytes(layers: Iterable[Sequence[MarlinLinear]]) -> int:
    """Cached bytes left after building the layers' tensors and repacking them in module order."""
    layers = [tuple(layer) for layer in layers]
    alloc = CachingAllocator()
    for i, layer in enumerate(layers):
        for j, lin in enumerate(layer):
            for name, nbytes in lin.construction():
                alloc.malloc((i, j, name), nbytes)
    for i, layer in enumerate(layers):
        for j, lin in enumerate(layer):
            sizes = dict(lin.construction())
            for action, name in lin.processing():
                if action == "replace":
                    alloc.malloc((i, j, name, "new"), sizes[name])
                alloc.free((i, j, name))
    return alloc.cached_in_used_segments()


def _marlin_linear(t: Tensor, g: Geometry) -> MarlinLinear | None:
    s = t.scheme
    if t.kind != "linear" or s is None or not s.name.startswith(("gptq int", "awq int")):
        return None
    rows, cols, _ = shape_on_rank(t, g)  # rows: output features N, cols: input features K
    return MarlinLinear(cols, rows, s.weight_bits, s.group, s.name.startswith("awq"))


# The attention projections vLLM's model classes merge into one `QKVParallelLinear` (e.g. `Qwen2Attention`,
# `LlamaAttention`, vllm/model_executor/models/qwen2.py, llama.py: `self.qkv_proj`): one qweight of
# N = q + k + v rows on the rank, as the table keeps gate_up_proj merged already.
QKV = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")


def layer_linears(tensors: Sequence[Tensor], g: Geometry) -> tuple[MarlinLinear, ...]:
    """The GPTQ/AWQ linear layers of one decoder layer on a rank, q/k/v merged as vLLM builds them."""
    out: list[MarlinLinear] = []
    merging = False
    for t in tensors:
        lin = _marlin_linear(t, g)
        if lin is None:
            merging = False
            continue
        if t.name in QKV[1:] and merging and out[-1].k == lin.k:
            out[-1] = MarlinLinear(lin.k, out[-1].n + lin.n, lin.bits, lin.group, lin.awq)
        else:
            out.append(lin)
        merging = t.name in QKV
    return tuple(out)


@functools.lru_cache(maxsize=64)
def first_stage_repack_cached(m: WeightsModel, tp: int, pp: int, version: Version) -> int:
    """`repack_cached_bytes` over the first pipeline stage's layers at this TP (0 when nothing is GPTQ/AWQ)."""
    g = Geometry(tp=tp, pp=pp, version=version)
    n = pp_layer_split(m.num_layers, pp, version)[0]
    layers = [layer_linears(m.tensors.layers[idx], g) for idx in m.tensors.layer_index[:n]]
    return repack_cached_bytes(layers) if any(layers) else 0

"""GPU presets: the total vLLM's budget multiplies, per card, with where each number comes from.

vLLM's budget is `ceil(total × gpu_memory_utilization)` where `total` is what
`torch.cuda.mem_get_info()` reports (`MemorySnapshot.measure`, vllm/utils/mem_utils.py): below
the marketing size and about 0.45 GiB below nvidia-smi's `memory.total`. The totals below are the
sourced values of /work/shared/data/gpu-totals.md (vLLM log lines `total_gpu_memory=…GiB`,
`Free memory on device (free/total GiB)`, PyTorch OOM texts "total capacity of X GiB"); where a
source gives a range the most often seen value is used. A measured log or nvidia-smi value wins.

Names are matched with case, spacing, dashes and underscores ignored, so "H100 80GB",
"h100-80gb" and nvidia-smi's product string "NVIDIA H100 80GB HBM3" all find the same preset.
`interconnect` is what a multi-GPU box of this card normally has (NVSwitch for SXM parts, PCIe
otherwise): it decides whether NCCL's NVLink-SHARP buffers exist (see app.core.nontorch).
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Literal

from app.core.errors import InputError

GIB = 1024**3
Interconnect = Literal["nvlink", "pcie"]


@dataclass(frozen=True)
class GpuPreset:
    name: str
    total_bytes: int
    aliases: tuple[str, ...]
    source: str
    interconnect: Interconnect = "pcie"
    memory_gib_nominal: int = 0


def _gib(value: float) -> int:
    return round(value * GIB)


PRESETS: tuple[GpuPreset, ...] = (
    GpuPreset("A100 40GB", _gib(39.56), ("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "A100 SXM 40GB", "A100 40G"),
              "vllm-project/vllm#8731 ('A100-SXM4-40GB … total capacity of 39.56 GiB')", "nvlink", 40),
    GpuPreset("A100 40GB PCIe", _gib(39.38), ("A100-PCIE-40GB", "NVIDIA A100-PCIE-40GB"),
              "vllm-project/vllm#16570 (A100-PCIE-40GB, 39.38 GiB logged)", "pcie", 40),
    GpuPreset("A100 80GB", _gib(79.15), ("A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "A100 80G", "A100-PCIE-80GB",
                                          "NVIDIA A100 80GB PCIe"),
              "vllm-project/vllm#4408 ('total capacity of 79.15 GiB'); PR #10909 (total_gpu_memory=79.15GiB)",
              "nvlink", 80),
    GpuPreset("H100 80GB", _gib(79.19), ("H100", "NVIDIA H100 80GB HBM3", "H100 SXM", "H100 SXM5 80GB",
                                          "NVIDIA H100 PCIe", "H100 PCIe", "H800"),
              "OOM texts 'NVIDIA H100 80GB HBM3 (79.19 GiB total)'; vllm-project/vllm#27508 (79.11), PR #10511 (79.22)",
              "nvlink", 80),
    GpuPreset("H100 NVL 94GB", _gib(93.10), ("H100 NVL", "NVIDIA H100 NVL"), "OOM texts 'H100 … 93.10 GiB'",
              "nvlink", 94),
    GpuPreset("H200 141GB", _gib(139.81), ("H200", "NVIDIA H200", "H200 SXM", "NVIDIA H200 NVL", "H200 NVL"),
              "OOM texts on 8×H200 (139.80); Qwen3-Next startup log on H200 (139.81)", "nvlink", 141),
    GpuPreset("H20 141GB", _gib(139.72), ("H20", "NVIDIA H20", "H20-3e", "NVIDIA H20-3e", "H20 141G"),
              "vllm-project/vllm#13074 (total_gpu_memory 139.72GiB)", "nvlink", 141),
    GpuPreset("B200 192GB", _gib(178.35), ("B200", "NVIDIA B200"),
              "vllm-project/vllm PR #25683 ('Free memory on device (176.17/178.35 GiB)')", "nvlink", 192),
    GpuPreset("L40S 48GB", _gib(44.42), ("L40S", "NVIDIA L40S", "A40", "NVIDIA A40", "L20", "NVIDIA L20"),
              "'Free memory on device (43.93/44.42 GiB)' on 8×L40S (tests/data/vllm-logs file 14)", "pcie", 48),
    GpuPreset("L40 48GB", _gib(44.40), ("L40", "NVIDIA L40"), "QwenLM/Qwen3-VL#2097 (L40, 44.40 GiB)", "pcie", 48),
    GpuPreset("L4 24GB", _gib(22.05), ("L4", "NVIDIA L4"),
              "vLLM CI OOM 'total capacity of 22.05 GiB' (L4 runners); pytorch/pytorch#175666", "pcie", 24),
    GpuPreset("A10 24GB", _gib(22.06), ("A10", "A10G", "NVIDIA A10", "NVIDIA A10G"),
              "vllm-project/vllm#928 ('24G A10 … 22.06 GiB')", "pcie", 24),
    GpuPreset("RTX 3090 24GB", _gib(23.58), ("RTX 3090", "3090", "NVIDIA GeForce RTX 3090", "GeForce RTX 3090"),
              "vllm-project/vllm#10517 (total_gpu_memory=23.58GiB)", "pcie", 24),
    GpuPreset("RTX 4090 24GB", _gib(23.52), ("RTX 4090", "4090", "NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
              "OOM texts pairing 'NVIDIA GeForce RTX 4090, 24564 MiB' with 'total capacity of 23.52 GiB'", "pcie", 24),
    GpuPreset("RTX 5090 32GB", _gib(31.37), ("RTX 5090", "5090", "NVIDIA GeForce RTX 5090", "GeForce RTX 5090"),
              "vllm-project/vllm#14452 (total_gpu_memory (31.37GiB))", "pcie", 32),
    GpuPreset("RTX 5090 Laptop 24GB", _gib(22.36), ("NVIDIA GeForce RTX 5090 Laptop GPU", "RTX 5090 Laptop"),
              "vllm-project/vllm PR #57595 ('total capacity of 22.36 GiB')", "pcie", 24),
    GpuPreset("MI300X 192GB", _gib(191.98), ("MI300X", "AMD Instinct MI300X"),
              "vllm-project/vllm#53961 ('MI300X (191.98 GiB)')", "nvlink", 192),
    GpuPreset("MI325X 256GB", _gib(255.98), ("MI325X", "AMD Instinct MI325X"),
              "ROCm OOM text ('HIP out of memory … 255.98 GiB'); card inferred from the size", "nvlink", 256),
    GpuPreset("DGX Spark GB10 128GB", _gib(121.63), ("GB10", "NVIDIA GB10", "DGX Spark"),
              "'vLLM sees 121.63 GiB'; free memory is MemFree on unified memory (vllm-project/vllm#48140)",
              "pcie", 128),
)  # fmt: skip

DEFAULT_GPU = "H100 80GB"


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.lower())


@functools.cache
def _index() -> dict[str, GpuPreset]:
    out: dict[str, GpuPreset] = {}
    for preset in PRESETS:
        for alias in (preset.name, *preset.aliases):
            out.setdefault(_key(alias), preset)
    return out


def nearest_presets(name: str, n: int = 3) -> tuple[str, ...]:
    """The preset names closest to a name (for an error message)."""
    keys = _index()
    close = difflib.get_close_matches(_key(name), list(keys), n=8, cutoff=0.3)
    names = list(dict.fromkeys(keys[k].name for k in close))
    return tuple(names[:n]) or tuple(p.name for p in PRESETS[:n])


@functools.lru_cache(maxsize=1024)
def find_preset(name: str) -> GpuPreset | None:
    """The preset a name or an nvidia-smi product string stands for, or None.

    Exact (normalised) name or alias first; then a product string that contains a preset's
    alias and a matching memory size ("NVIDIA H100 80GB HBM3" → H100 80GB).
    """
    key = _key(name)
    index = _index()
    if key in index:
        return index[key]
    size = re.search(r"(\d+)\s*g(?:i)?b", name.lower())
    size_gb = int(size.group(1)) if size else None
    best: GpuPreset | None = None
    best_len = 0
    for alias_key, preset in index.items():
        fits = size_gb is None or preset.memory_gib_nominal in (0, size_gb)
        if len(alias_key) >= 2 and alias_key in key and len(alias_key) > best_len and fits:
            best, best_len = preset, len(alias_key)
    return best


def resolve_gpu(name: str, field: str = "gpu.name") -> GpuPreset:
    """The preset for a GPU name; an unknown name → InputError listing the nearest presets."""
    preset = find_preset(name)
    if preset is None:
        near = ", ".join(repr(n) for n in nearest_presets(name))
        raise InputError(
            field,
            f"unknown GPU {name!r}: no preset matches (nearest: {near}); give gpu.total in bytes or GiB instead",
        )
    return preset


def preset_rows() -> list[dict[str, object]]:
    """Every preset as the JSON rows `kvledger gpus --json` prints."""
    return [
        {
            "name": p.name,
            "total_bytes": p.total_bytes,
            "aliases": list(p.aliases),
            "source": p.source,
            "interconnect": p.interconnect,
        }
        for p in PRESETS
    ]


# NVIDIA compute capability by card family (CUDA's compute-capability table), for vLLM rules that
# depend on the architecture. None for AMD cards and names outside these families.
_CAPABILITY: tuple[tuple[str, tuple[int, int]], ...] = (
    (r"\b(a100|a800|a30)\b", (8, 0)),
    (r"\b(a10g?|a40|a6000|rtx\s*a6000|rtx\s*30[5-9]0|30[5-9]0)\b", (8, 6)),
    (r"\b(l4|l40s?|rtx\s*40[6-9]0|40[6-9]0|6000\s*ada)\b", (8, 9)),
    (r"\b(h100|h800|h200|h20|gh200)\b", (9, 0)),
    (r"\b(b200|b300|gb200|gb300)\b", (10, 0)),
    (r"\b(gb10|dgx\s*spark)\b", (12, 1)),
    (r"\b(rtx\s*50[6-9]0|50[6-9]0|rtx\s*pro\s*6000)\b", (12, 0)),
)


def compute_capability(name: str | None) -> tuple[int, int] | None:
    """The CUDA compute capability of a card named like a preset or an nvidia-smi product string."""
    text = (name or "").lower()
    return next((cc for pattern, cc in _CAPABILITY if re.search(pattern, text)), None)

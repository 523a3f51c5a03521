"""Peak memory bandwidth and dense BF16 tensor throughput of the GPU presets (app.core.gpus).

Vendor datasheet figures, dense (the "with sparsity" figures halved), for the preset's main
part (SXM where a preset also matches a PCIe card: the PCIe parts are slower). They feed the
simulator's roofline step cost (app.core.sim.cost.roofline_cost), which is an estimate: real
engines reach roughly 60–85 % of peak bandwidth. A preset missing here has no sourced figure;
the simulator then keeps its illustrative defaults and says so.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPerf:
    hbm_bytes_per_s: float
    bf16_flops: float
    source: str


_NV = "NVIDIA {} datasheet"
PERF: dict[str, GpuPerf] = {
    "A100 40GB": GpuPerf(1.555e12, 312e12, _NV.format("A100 (SXM4 40GB: 1,555 GB/s; BF16 312 TFLOPS)")),
    "A100 40GB PCIe": GpuPerf(1.555e12, 312e12, _NV.format("A100 (PCIe 40GB: 1,555 GB/s; BF16 312 TFLOPS)")),
    "A100 80GB": GpuPerf(2.039e12, 312e12, _NV.format("A100 (SXM4 80GB: 2,039 GB/s; BF16 312 TFLOPS)")),
    "H100 80GB": GpuPerf(3.35e12, 989e12, _NV.format("H100 (SXM5: 3.35 TB/s; BF16 1,979 TFLOPS sparse)")),
    "H100 NVL 94GB": GpuPerf(3.9e12, 835e12, _NV.format("H100 NVL (3.9 TB/s; BF16 1,671 TFLOPS sparse)")),
    "H200 141GB": GpuPerf(4.8e12, 989e12, _NV.format("H200 (SXM: 4.8 TB/s; BF16 1,979 TFLOPS sparse)")),
    "B200 192GB": GpuPerf(8.0e12, 2.25e15, _NV.format("HGX B200 (8 TB/s; BF16 4.5 PFLOPS sparse)")),
    "L40S 48GB": GpuPerf(864e9, 362e12, _NV.format("L40S (864 GB/s; BF16 362 TFLOPS)")),
    "L40 48GB": GpuPerf(864e9, 181e12, _NV.format("L40 (864 GB/s; BF16 181 TFLOPS)")),
    "L4 24GB": GpuPerf(300e9, 121e12, _NV.format("L4 (300 GB/s; BF16 242 TFLOPS sparse)")),
    "A10 24GB": GpuPerf(600e9, 125e12, _NV.format("A10 (600 GB/s; BF16 125 TFLOPS)")),
    "RTX 3090 24GB": GpuPerf(936e9, 71e12, "NVIDIA Ampere GA102 whitepaper (936 GB/s; BF16 FP32-acc 71 TFLOPS)"),
    "RTX 4090 24GB": GpuPerf(1008e9, 165e12, "NVIDIA Ada whitepaper (1,008 GB/s; BF16 FP32-acc 165 TFLOPS)"),
    "RTX 5090 32GB": GpuPerf(1792e9, 209.5e12, "NVIDIA Blackwell GeForce whitepaper (1,792 GB/s; 209.5 TFLOPS)"),
    "MI300X 192GB": GpuPerf(5.3e12, 1307e12, "AMD Instinct MI300X datasheet (5.3 TB/s; BF16 1,307 TFLOPS)"),
    "MI325X 256GB": GpuPerf(6.0e12, 1307e12, "AMD Instinct MI325X datasheet (6 TB/s; BF16 1,307 TFLOPS)"),
}


def gpu_perf(preset_name: str) -> GpuPerf | None:
    """The sourced figures of a preset (by its canonical name), or None."""
    return PERF.get(preset_name)

"""The dequantized weight the plain (non-Marlin) AWQ and GPTQ linear kernels hold during the profile run.

With `--quantization awq` forced on an AWQ checkpoint ("Detected that the model can run with awq_marlin,
however you specified quantization=awq explicitly, so forcing awq", `AWQMarlinConfig.
override_quantization_method`, vllm/model_executor/layers/quantization/awq_marlin.py @4dd49b06f, v0.19)
every linear layer runs `AWQLinearMethod.apply` (vllm/model_executor/layers/quantization/awq.py
@4dd49b06f): when the batch has 256 tokens or more (`FP16_MATMUL_HEURISTIC_CONDITION =
x.shape[:-1].numel() >= 256`) it calls `ops.awq_dequantize(qweight, scales, qzeros, 0, 0, 0)`, which
returns a new `torch.empty({in_c, out_c})` in the scales' dtype (csrc/quantization/awq/gemm_kernels.cu
`awq_dequantize`: in_c = qweight rows = K, out_c = qweight columns × 8 = N; the fake op in
vllm/_custom_ops.py `_awq_dequantize_fake` has the same shape), then `torch.matmul(x, w)`. Below 256
tokens it runs `awq_gemm` on the packed weight (no such tensor).

With `--quantization gptq` forced on a GPTQ checkpoint (`GPTQLinearMethod.apply`,
vllm/model_executor/layers/quantization/gptq.py @4dd49b06f) every call is `ops.gptq_gemm`, whose C++
allocates `temp_dq = torch::empty({qweight.size(0) * 32 / bit, qweight.size(1)})` in the input's dtype
on every call, whatever the batch (csrc/quantization/gptq/q_gemm.cu `gptq_gemm` @4dd49b06f; the
reconstruct-then-cuBLAS path that fills it is taken above 50 rows, 24 for 8 bits).

Either way the tensor is K × N × 2 bytes per rank (fp16; the plain kernels take no bf16), allocated
by torch's caching allocator inside the dummy forward, so the profile's torch peak holds it beside the
activations. It is freed as the op (GPTQ) or its matmul (AWQ: the compiled graph frees a buffer after
its last use) returns, and each linear's dequantize runs right before its own matmul, so one is live
at a time: the forward's peak grows by the largest one on the rank. Counted on top of the forward's
largest step, an upper bound: the largest linear is gate_up, whose matmul comes before SiluAndMul's
output (the step counted in app.core.profile_run) exists, by (I/TP − hidden) elements a token less.

From vLLM 0.23 a forced `--quantization gptq` no longer has a plain kernel: PR #38288 (fa2a33b89,
2026-05-14) deleted gptq.py and put "gptq" among the names `ModelConfig._verify_quantization`'s
overrides resolve (vllm/config/model.py), to `auto_gptq`, the former gptq_marlin (Marlin where the card
supports it). The mirror has no release tags: the v0.21 branch was cut about 04-28 and releases came
about every two and a half weeks, so 0.23 is taken as the first release with it, which keeps the
term (more memory, a smaller KV estimate) on 0.22 if that branch was cut after 05-14.

Not modelled: the same kernels on cards where Marlin is not supported (vLLM then keeps plain AWQ/GPTQ
without a flag), `VLLM_BATCH_INVARIANT` (AWQ's dequantize path at any batch), expert layers (FusedMoE
takes the Marlin or WNA16 MoE method, `AWQConfig.get_quant_method`).
"""

from __future__ import annotations

import functools

from app.core.repack_cache import MarlinLinear, layer_linears
from app.core.shape import ModelShape
from app.core.weights_tensor import Geometry, Version, WeightsModel

AWQ_DEQUANT_MIN_TOKENS = 256  # FP16_MATMUL_HEURISTIC_CONDITION, awq.py @4dd49b06f
FP16_BYTES = 2


#: The first release whose `--quantization gptq` resolves to auto_gptq (Marlin), not a plain kernel (PR #38288).
GPTQ_PLAIN_REMOVED: Version = (0, 23, 0)


def plain_kernel(checkpoint: str | None, flag: str | None, version: Version) -> str | None:
    """"awq" / "gptq" where vLLM runs the plain (dequantizing) linear method: the flag forces the
    checkpoint's own method by name (without it, or with *_marlin, vLLM takes Marlin where it can);
    a forced gptq from 0.23 on is auto_gptq, Marlin (GPTQ_PLAIN_REMOVED)."""
    if checkpoint is None or flag is None:
        return None
    flag, checkpoint = flag.lower(), checkpoint.lower()
    if flag == "gptq" and version >= GPTQ_PLAIN_REMOVED:
        return None
    return flag if flag in ("awq", "gptq") and checkpoint == flag else None


def largest_linear(shape: ModelShape, tp: int, version: Version) -> MarlinLinear | None:
    """The quantized linear layer with the most K × N elements on one TP rank (None without a tensor table)."""
    return None if shape.weights is None else _largest(shape.weights, tp, version)


@functools.lru_cache(maxsize=64)
def _largest(m: WeightsModel, tp: int, version: Version) -> MarlinLinear | None:
    g = Geometry(tp=tp, version=version)
    best: MarlinLinear | None = None
    for layer in m.tensors.layers:
        for lin in layer_linears(layer, g):
            if best is None or lin.k * lin.n > best.k * best.n:
                best = lin
    return best


def dequant_peak_bytes(shape: ModelShape, kernel: str | None, tp: int, tokens: int, version: Version) -> int:
    """Bytes the profile forward of `tokens` tokens holds beyond its activations (see the module docstring)."""
    if kernel is None or (kernel == "awq" and tokens < AWQ_DEQUANT_MIN_TOKENS):
        return 0
    lin = largest_linear(shape, tp, version)
    return 0 if lin is None else lin.k * lin.n * FP16_BYTES

"""The plain AWQ/GPTQ kernels' dequantized weight in the profile run's peak (app.core.dequant_linear):
the term against the checkpoint's config numbers by hand, the rules that switch it on, and the activation
row of public/65 (Llama-3.1-70B AWQ INT4, `--quantization awq` forced, TP2, v0.19.0)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_estimates_loo import _shape, calibration_without, predict
from bench_unseen import UNSEEN

from app.core.dequant_linear import dequant_peak_bytes, plain_kernel
from app.core.estimates import EstimateContext, activation_for_stage, estimate_ranks
from app.core.versions import rules_for
from app.ingest.catalogue import get_model

GIB = 1024**3
V019 = (0, 19, 0)
LOG_65 = "public/65-v0190-llama31-70b-awq-2xa100-40gb-tp2-forced-awq.log"


def _by_hand_gate_up_bytes(tp: int) -> int:
    """Llama-3.1-70B's config: gate_up_proj is hidden × 2·intermediate, split over TP by its output, in fp16
    (`awq_dequantize` returns K × N in the scales' dtype). Read from the config, not the tensor table."""
    cfg = get_model("llama-3.1-70b").config
    hidden, inter = int(str(cfg["hidden_size"])), int(str(cfg["intermediate_size"]))
    return hidden * (2 * inter // tp) * 2


def test_largest_dequantized_weight_is_gate_up_by_hand() -> None:
    shape, _ = _shape("llama-3.1-70b-awq-int4")
    assert _by_hand_gate_up_bytes(2) == 8192 * 28672 * 2  # 0.4375 GiB
    assert dequant_peak_bytes(shape, "awq", 2, 2048, V019) == _by_hand_gate_up_bytes(2)
    assert dequant_peak_bytes(shape, "awq", 4, 2048, V019) == _by_hand_gate_up_bytes(4)


def test_awq_dequantizes_from_256_tokens_gptq_always() -> None:
    awq, _ = _shape("llama-3.1-70b-awq-int4")
    assert dequant_peak_bytes(awq, "awq", 2, 255, V019) == 0  # awq_gemm on the packed weight
    assert dequant_peak_bytes(awq, "awq", 2, 256, V019) > 0  # FP16_MATMUL_HEURISTIC_CONDITION
    gptq, _ = _shape("qwen2.5-72b-gptq-int4")
    assert dequant_peak_bytes(gptq, "gptq", 1, 1, V019) == 8192 * 2 * 29568 * 2  # temp_dq on every call


def test_only_a_flag_that_forces_the_checkpoints_own_method() -> None:
    v19 = (0, 19, 0)
    assert plain_kernel("awq", "awq", v19) == "awq"
    assert plain_kernel("gptq", "GPTQ", v19) == "gptq"
    assert plain_kernel("awq", None, v19) is None  # vLLM upgrades to awq_marlin
    assert plain_kernel("awq", "awq_marlin", v19) is None
    assert plain_kernel(None, "fp8", v19) is None
    assert plain_kernel("gptq", "awq", v19) is None
    # PR #38288 (fa2a33b89) removed gptq.py: a forced gptq is auto_gptq (Marlin) from 0.23; plain AWQ stays
    assert plain_kernel("gptq", "gptq", (0, 22, 1)) == "gptq"
    assert plain_kernel("gptq", "gptq", (0, 23, 0)) is None
    assert plain_kernel("gptq", "gptq", (0, 27, 1)) is None
    assert plain_kernel("awq", "awq", (0, 27, 1)) == "awq"


def _ctx(quantization: str | None) -> EstimateContext:
    return EstimateContext(2, 1, 2048, 256, False, rules_for("0.19.0"), v1=True, quantization=quantization)


def test_activation_row_holds_it_beside_the_forward() -> None:
    """The forward's peak plus the dequantized gate_up becomes the profile's peak (above the sampler's)."""
    shape, _ = _shape("llama-3.1-70b-awq-int4")
    plain = activation_for_stage(shape, _ctx(None), True)
    forced = activation_for_stage(shape, _ctx("awq"), True)
    assert plain.dequant == 0
    assert forced.dequant == _by_hand_gate_up_bytes(2)
    assert forced.peak == max(plain.peak, plain.forward + forced.dequant)
    assert forced.peak > plain.peak
    cell = estimate_ranks(shape, _ctx("awq"), 40 * GIB, None)[0].activation
    assert cell is not None and cell.bytes == forced.peak
    assert "--quantization awq" in cell.note


def test_public_65_activation_row() -> None:
    """public/65 (bench/bench_unseen.py): 0.9 × 39.56 − 18.58 weights − 15.96 KV leaves 1.06 GiB for non-torch +
    activation; the activation row is now 0.66 GiB (0.23 forward + 0.44 dequantized gate_up) against 0.46
    (the sampler step) before."""
    case = next(c for _, c, _ in UNSEEN if c.log == LOG_65)
    assert case.quantization == "awq"
    _, _, rows = predict(case, calibration_without(case.log), "measured")
    assert abs(rows["activation"] / GIB - 0.66) < 0.01


def test_public_65_graph_capture_holds_it_too() -> None:
    """The captures of 256 tokens or more run the same dequantize (awq.py's threshold), so the largest piecewise
    capture (512) leaves the dequantized gate_up in the graph pool: public/65 logs 'Graph capturing finished in 30
    secs, took 1.73 GiB'; the row is 1.75 GiB with it, 1.31 without (it was 1.31 before stop 29)."""
    case = next(c for _, c, _ in UNSEEN if c.log == LOG_65)
    _, _, rows = predict(case, calibration_without(case.log), "measured")
    assert abs(rows["cuda_graphs"] / (1.73 * GIB) - 1) < 0.03
    unforced = predict(replace(case, quantization=None), calibration_without(case.log), "measured")[2]
    assert rows["cuda_graphs"] - unforced["cuda_graphs"] == _by_hand_gate_up_bytes(2)

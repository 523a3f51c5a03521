"""The plan form's Weights select of a GPTQ checkpoint: the plain kernel is offered only where vLLM has
one. PR #38288 (fa2a33b89) deleted gptq.py, so from 0.23 `--quantization gptq` runs auto_gptq (Marlin)
and a "gptq, plain kernel" choice would promise a plan vLLM cannot run; AWQ keeps its plain kernel."""

from __future__ import annotations

from app.web.plan.form import checkpoint_quant_options


def test_gptq_offers_its_plain_kernel_only_before_auto_gptq() -> None:
    before = checkpoint_quant_options("gptq", None, False, (0, 22, 1))
    assert [value for value, _ in before][1:] == ["gptq"] and "plain kernel" in before[1][1]
    after = checkpoint_quant_options("gptq", None, False, (0, 27, 1))
    assert len(after) == 1 and "auto_gptq" in after[0][1] and "plain" not in after[0][1]
    awq = checkpoint_quant_options("awq", None, False, (0, 27, 1))
    assert [value for value, _ in awq][1:] == ["awq"]

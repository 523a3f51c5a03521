"""The plan form's Weights select on an AWQ checkpoint, in Chromium. Before, it had one option, "as the
checkpoint (awq)", shown even for a plan forcing `engine.quantization: awq` (`vllm serve … -q awq`: the
plain dequantizing kernel, app.core.dequant_linear), which is not what vLLM runs by default (awq_marlin),
and it offered no other choice. Now it offers what vLLM accepts for the checkpoint (no --quantization:
awq_marlin; `--quantization awq`: the plain kernel; `ModelConfig._verify_quantization` and
`AWQMarlinConfig.override_quantization_method` @28be48fa9), shows the plan's own, and switching moves the
plan (the dequantized weight enters the activation row and leaves it)."""

from __future__ import annotations

from typing import Any

import pytest

from app.ingest.catalogue import get_model

from .plan_page import edit_saved, ready, twin

pytestmark = pytest.mark.e2e

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


def _doc(forced: bool) -> dict[str, Any]:
    config = {**get_model("llama-3.1-70b").config_dict(), "quantization_config": AWQ}
    engine: dict[str, Any] = {"enforce_eager": True, "max_model_len": 8192, "max_num_batched_tokens": 2048}
    if forced:
        engine["quantization"] = "awq"
    return {"model": {"config": config}, "gpu": {"name": "A100 40GB"}, "layout": {"tp": 2}, "engine": engine,
            "vllm_version": "0.19.0", "title": "awq forced" if forced else "awq"}  # fmt: skip


def _select(page: Any) -> tuple[str, str, list[str]]:
    value = page.eval_on_selector("#f-quant", "e => e.value")
    label = page.eval_on_selector("#f-quant", "e => e.options[e.selectedIndex].textContent")
    options = page.eval_on_selector("#f-quant", "e => [...e.options].map(o => o.value)")
    return value, label, options


def _activation(page: Any) -> int:
    return int(twin(page)["ranks"][0]["activation_bytes"])


def test_a_forced_plain_awq_plan_shows_and_switches_its_kernel(page: Any) -> None:
    edit_saved(page, _doc(forced=True))
    value, label, options = _select(page)
    assert (value, options) == ("awq", ["default", "awq"]) and "plain kernel (--quantization awq)" in label
    forced = _activation(page)
    page.select_option("#f-quant", "default")
    page.wait_for_url("**quant=default**")
    ready(page)
    assert twin(page)["engine"]["quantization"] is None
    assert _activation(page) < forced  # no dequantized gate_up in the profile run
    page.reload()
    ready(page)
    value, label, _ = _select(page)
    assert value == "default" and "awq_marlin" in label
    page.select_option("#f-quant", "awq")
    page.wait_for_url(lambda url: "quant=" not in url)  # the base's own setting: the canonical URL drops it
    ready(page)
    assert twin(page)["engine"]["quantization"] == "awq" and _activation(page) == forced


def test_an_awq_checkpoint_offers_the_plain_kernel(page: Any) -> None:
    edit_saved(page, _doc(forced=False))
    value, label, options = _select(page)
    assert (value, options) == ("default", ["default", "awq"]) and "awq_marlin" in label

"""The card's name reaches every path that re-estimates rows (issue 10): the start levers and the
what-ifs build their estimate contexts from the plan, so gpt-oss on an A100 keeps the Marlin MXFP4
layout vLLM loads below compute capability 9.0 (estimates.mxfp4_backend_for)."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from app.core.estimates import estimate_ranks
from app.core.plan import plan_estimate_context
from app.services import plan_inputs, plans

DOC = {"model": {"catalogue": "gpt-oss-120b"}, "gpu": {"name": "A100 80GB"}, "layout": {"tp": 1},
       "engine": {"max_model_len": 131072}, "vllm_version": "0.10.2"}  # fmt: skip


def test_plan_carries_the_card_name_into_its_estimate_context() -> None:
    # at v0.19 (at v0.10.2 vLLM bundles no triton_kernels: Marlin on both cards, weights_tensor.mxfp4_layout)
    plan = plan_inputs.plan_input({**DOC, "vllm_version": "0.19.0"})
    assert plan.gpu_name == "A100 80GB"
    ctx = plan_estimate_context(plan)
    assert ctx.mxfp4_backend == "marlin"
    assert plan_estimate_context(replace(plan, gpu_name="H100 80GB")).mxfp4_backend == "triton"
    # the rows the plan was built with are the Marlin layout's
    total = plan.ranks[0].total
    assert total is not None
    marlin = estimate_ranks(plan.model.shape, ctx, total.bytes, None)  # type: ignore[arg-type]
    triton = estimate_ranks(plan.model.shape, replace(ctx, mxfp4_backend="triton"), total.bytes, None)  # type: ignore[arg-type]
    assert plan.ranks[0].weights == marlin[0].weights != triton[0].weights


def test_start_lever_promises_what_the_changed_plan_gives() -> None:
    """Walk the page's path: the plan does not start at TP1; its TP lever's tokens are the tokens of
    the plan with that TP (before the fix the lever re-estimated with the Triton layout: 994,736
    promised where the TP2 plan gives 948,944)."""
    out = plans.run_plan(DOC, with_levers=False)
    assert out["will_start"] is False
    for lever in out["start_levers"]:
        if lever["knob"] not in ("tensor_parallel_size", "pipeline_parallel_size"):
            continue
        (path, value), = lever["sets"].items()
        section, key = path.split(".")
        changed = {**DOC, section: {**DOC[section], key: value}}  # type: ignore[dict-item]
        applied = plans.run_plan(changed, with_levers=False)
        assert lever["tokens_after"] == applied["tokens"], (lever, applied["tokens"])
        assert lever["will_start"] == applied["will_start"]


@pytest.mark.parametrize("stated", [{}, {"max_num_batched_tokens": 2048, "max_num_seqs": 256}])
def test_the_larger_card_lever_promises_what_that_card_gives(stated: dict[str, int]) -> None:
    """The larger-card lever re-estimates on the card itself: its name (gpt-oss-120b loads the Marlin
    MXFP4 layout on an A100, Triton on H100-class cards) and, where the plan took them, vLLM's
    scheduler defaults for that card (an A100 gets 2048 tokens / 256 sequences, a ≥ 70 GiB H100
    8192 / 1024). Before, the lever kept the A100's: 230,016 tokens promised where the H100 NVL plan
    gives 149,936. Stated values stay stated."""
    doc = {**DOC, "engine": {**DOC["engine"], **stated}}  # type: ignore[dict-item]
    out = plans.run_plan(doc, with_levers=False)
    levers = [lv for lv in out["start_levers"] if lv["knob"] == "gpu"]
    assert levers, out["start_levers"]
    for lever in levers:
        assert set(lever["sets"]) == {"gpu.total", "gpu.name"}
        applied = plans.run_plan({**doc, "gpu": {"name": lever["sets"]["gpu.name"]}}, with_levers=False)
        assert lever["tokens_after"] == applied["tokens"], (lever, applied["tokens"])
        assert lever["will_start"] == applied["will_start"]


NOT_STARTING: list[dict[str, Any]] = [
    {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"name": "L40S 48GB"}, "layout": {"tp": 2}},
    {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "L4 24GB"}, "engine": {"max_model_len": 131072}},
    {"model": {"catalogue": "qwen3-30b-a3b"}, "gpu": {"name": "RTX 4090 24GB"}, "layout": {"tp": 2},
     "engine": {"max_model_len": 40960}},
]  # fmt: skip


def _applied(doc: dict[str, Any], sets: dict[str, Any]) -> dict[str, Any]:
    """The document with a lever's `sets` applied, path by path (a card by its preset name)."""
    out = copy.deepcopy(doc)
    for path, value in sets.items():
        section, key = path.split(".", 1)
        if section == "gpu":
            out["gpu"] = {"name": sets["gpu.name"]} if "gpu.name" in sets else {"total": value}
        elif value is None:
            out.setdefault(section, {}).pop(key, None)
        else:
            out.setdefault(section, {})[key] = value
    return out


@pytest.mark.parametrize("doc", NOT_STARTING, ids=[d["model"]["catalogue"] for d in NOT_STARTING])
def test_every_start_lever_promises_what_its_sets_give(doc: dict[str, Any]) -> None:
    out = plans.run_plan(doc, with_levers=False)
    assert out["will_start"] is False and out["start_levers"]
    for lever in out["start_levers"]:
        applied = plans.run_plan(_applied(doc, lever["sets"]), with_levers=False)
        assert (lever["tokens_after"], lever["will_start"]) == (applied["tokens"], applied["will_start"]), lever

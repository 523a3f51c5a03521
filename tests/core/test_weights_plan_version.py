"""The what-if and speculative paths price weights by the plan's own vLLM release, as the plan does."""

from __future__ import annotations

import pytest

from app.core.weights import weights_model, weights_per_rank
from app.ingest.catalogue import get_model
from app.services.plans import run_plan

GPT_OSS_DRAFT = {"method": "draft_model", "model": {"catalogue": "gpt-oss-20b"}, "num_speculative_tokens": 2}


@pytest.mark.parametrize("version", ["0.10.1", "0.19.0"])
def test_a_draft_models_weights_follow_the_plans_release(version: str) -> None:
    # gpt-oss-20b as the draft of gpt-oss-120b on an H100: v0.10.1 loads MXFP4 experts through Marlin,
    # v0.19.0 through Triton's layout (weights_tensor.mxfp4_layout): the draft row must be the same
    # release's count as the target's.
    doc = {"model": {"catalogue": "gpt-oss-120b"}, "gpu": {"name": "H100"}, "vllm_version": version,
           "engine": {"max_model_len": 8192, "speculative": GPT_OSS_DRAFT}}  # fmt: skip
    rank = run_plan(doc, with_levers=False)["ranks"][0]
    draft = weights_model(get_model("gpt-oss-20b").config_dict())
    major, minor, patch = (int(x) for x in version.split("."))
    assert rank["speculative_bytes"] == weights_per_rank(draft, 1, vllm_version=(major, minor, patch)).nbytes


def test_the_two_releases_count_the_draft_differently() -> None:
    # Guards the test above from passing vacuously: the rules differ at this layout.
    draft = weights_model(get_model("gpt-oss-20b").config_dict())
    assert weights_per_rank(draft, 1, vllm_version=(0, 10, 1)).nbytes != weights_per_rank(draft, 1).nbytes


@pytest.mark.parametrize("version", ["0.7.2", "0.19.0"])
def test_fp8_as_a_what_if_gives_the_settings_weights_at_the_plans_release(version: str) -> None:
    # Llama-3.1-70B at TP2 × PP3: before v0.8 get_pp_indices gave the remainder to the last stage
    # (26/26/28 layers), after it spreads it (26/27/27); the what-if's before/after ratio must be
    # taken at the plan's split, or fp8 as a what-if and as a setting disagree per stage.
    doc = {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"total": "80GiB"}, "layout": {"tp": 2, "pp": 3},
           "vllm_version": version}  # fmt: skip
    setting = run_plan({**doc, "engine": {"quantization": "fp8"}}, with_levers=False)
    whatif = run_plan({**doc, "whatif": {"quantization": "fp8"}}, with_levers=False)
    assert [r["weights_bytes"] for r in setting["ranks"]] == [r["weights_bytes"] for r in whatif["ranks"]]

"""Architectures by vLLM's model registry (app/data/vllm_architectures.json), and unknown
quantization methods: a clear message naming the field, or a note saying what was assumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.architectures import FIELD, architecture_notes, registry
from app.core.errors import InputError
from app.ingest.catalogue import get_model
from app.services import model_input, plans

ROOT = Path(__file__).resolve().parents[2]
MIRROR = Path("/work/.mirror/local-inference-lab+vllm/repo")
LLAMA = json.loads((ROOT / "tests" / "data" / "configs" / "llama31-8b.json").read_text())


def _refusal(config: dict[str, object], version: str = "0.27.1") -> str:
    with pytest.raises(InputError) as err:
        architecture_notes(config, version)
    assert err.value.field == FIELD
    return err.value.message


def test_every_catalogue_model_is_an_architecture_vllm_loads() -> None:
    for m in model_input.catalogue_search("", limit=500):
        assert architecture_notes(get_model(m["slug"]).config_dict(), "0.27.1") == (), m["slug"]


def test_a_misspelt_architecture_is_refused_with_the_nearest_names() -> None:
    message = _refusal({"architectures": ["LlamaForCausalLm"]})
    assert "'LlamaForCausalLm' is not an architecture vLLM supports" in message
    assert "nearest: LlamaForCausalLM" in message and registry().commit[:10] in message


def test_a_task_suffix_swaps_to_the_registered_base() -> None:
    # _normalize_arch: GraniteForSequenceClassification is not registered; GraniteForCausalLM is
    assert "GraniteForSequenceClassification" not in registry().names
    assert architecture_notes({"architectures": ["GraniteForSequenceClassification"]}, "0.27.1") == ()


def test_removed_architectures_name_the_last_release() -> None:
    assert architecture_notes({"architectures": ["Phi3SmallForCausalLM"]}, "0.9.2") == ()
    assert "until v0.9.2" in _refusal({"architectures": ["Phi3SmallForCausalLM"]}, "0.10.0")
    assert "bart-plugin" in _refusal({"architectures": ["BartForConditionalGeneration"]})


def test_custom_code_runs_on_the_transformers_backend_and_says_so() -> None:
    config = {"architectures": ["AcmeForCausalLM"], "auto_map": {"AutoModelForCausalLM": "modeling_acme.Acme"}}
    (note,) = architecture_notes(config, "0.27.1")
    assert "Transformers backend" in note and "AcmeForCausalLM" in note
    assert "Transformers backend" in _refusal({"architectures": ["AcmeForCausalLM"]})


@pytest.mark.parametrize("value", [[], "LlamaForCausalLM", [3]])
def test_a_malformed_architectures_field_is_named(value: object) -> None:
    assert "list of architecture names" in _refusal({"architectures": value})


def test_the_plan_refuses_naming_the_field() -> None:
    doc = {"model": {"config": {**LLAMA, "architectures": ["LlamaForCausalLm"]}}, "gpu": {"name": "H100 80GB"}}
    with pytest.raises(InputError) as err:
        plans.run_plan(doc, with_levers=False)
    assert err.value.field == FIELD
    custom = {**LLAMA, "architectures": ["AcmeForCausalLM"], "auto_map": {"AutoModel": "m.Acme"}}
    result = plans.run_plan({"model": {"config": custom}, "gpu": {"name": "H100 80GB"}}, with_levers=False)
    assert any("Transformers backend" in n for n in result["notes"])


def test_an_unknown_quantization_method_is_refused_naming_the_field() -> None:
    config = {**LLAMA, "quantization_config": {"quant_method": "fp9"}}
    with pytest.raises(InputError) as err:
        plans.run_plan({"model": {"config": config}, "gpu": {"name": "H100 80GB"}}, with_levers=False)
    assert err.value.field == "model.config.quantization_config.quant_method"
    assert "'fp9' is not a quantization method vLLM supports" in err.value.message
    assert "nearest: fp8" in err.value.message


@pytest.mark.skipif(not (MIRROR / "HEAD").exists() and not MIRROR.exists(), reason="no vLLM git mirror here")
def test_the_shipped_list_is_what_the_script_extracts_at_its_commit() -> None:
    shipped = json.loads((ROOT / "app" / "data" / "vllm_architectures.json").read_text())
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "extract_vllm_architectures.py"), str(MIRROR), shipped["commit"]],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ},
    )
    assert json.loads(out.stdout) == shipped

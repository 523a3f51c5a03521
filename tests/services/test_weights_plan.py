"""The plan document's model.safetensors_index: validated in schemas, exact weights in the estimated row."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.errors import InputError
from app.ingest.catalogue import get_model
from app.services.plans import run_plan

GIB = 1024**3


def doc(**model: Any) -> dict[str, Any]:
    return {"model": model, "gpu": {"total": "80GiB"}, "layout": {"tp": 2}, "engine": {"max_model_len": 4096}}


def weights_row(result: dict[str, Any]) -> int:
    return int(result["ranks"][0]["weights_bytes"])


def test_index_beside_config_and_beside_catalogue() -> None:
    config = get_model("qwen3-8b").config_dict()
    plain = weights_row(run_plan(doc(config=config), with_levers=False))
    doubled = {"metadata": {"total_size": 2 * 16381470720}, "weight_map": {"lm_head.weight": "a.safetensors"}}
    with_index = weights_row(run_plan(doc(config=config, safetensors_index=doubled), with_levers=False))
    beside_catalogue = weights_row(run_plan(doc(catalogue="qwen3-8b", safetensors_index=doubled), with_levers=False))
    assert with_index == beside_catalogue
    assert with_index == pytest.approx(2 * plain, rel=0.01)  # everything but the rotary cache doubles


@pytest.mark.parametrize(
    ("index", "field"),
    [
        ({"weight_map": {}}, "model.safetensors_index.metadata"),
        ({"metadata": {"total_size": -1}}, "model.safetensors_index.metadata.total_size"),
        ({"metadata": {"total_size": "12"}}, "model.safetensors_index.metadata.total_size"),
        ({"metadata": {"total_size": 10}, "weight_map": {"x": 1}}, "model.safetensors_index.weight_map.x"),
        ("not an object", "model.safetensors_index"),
    ],
)
def test_malformed_index_names_the_field(index: object, field: str) -> None:
    with pytest.raises(InputError) as err:
        run_plan(doc(catalogue="qwen3-8b", safetensors_index=index), with_levers=False)
    assert err.value.field == field


def test_index_without_a_model_shape_is_refused() -> None:
    with pytest.raises(InputError) as err:
        run_plan(doc(kv_bytes_per_token=1000, safetensors_index={"metadata": {"total_size": 10}}), with_levers=False)
    assert err.value.field == "model" and "safetensors_index" in err.value.message

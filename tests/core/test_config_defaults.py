"""Config defaults: fields a config.json omits take its transformers class's defaults (issue 10 item 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.core.config_defaults import CLASS_DEFAULTS, TRANSFORMERS_VERSION
from app.core.model_config import shape_from_config
from app.ingest.catalogue import get_model

PINNED = json.loads((Path(__file__).resolve().parents[1] / "data" / "transformers-config-defaults.json").read_text())
SIZE_FIELDS = {"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"}


def test_the_table_is_the_transformers_source() -> None:
    # tests/data/transformers-config-defaults.json was read from the transformers 5.24.0 wheel's
    # configuration_*.py by scripts/transformers_defaults.py (class-level field defaults).
    assert PINNED["source"] == f"transformers-{TRANSFORMERS_VERSION}-py3-none-any.whl"
    for model_type, table in CLASS_DEFAULTS.items():
        source = PINNED["defaults"][model_type]
        assert table == {k: v for k, v in table.items() if source.get(k) == v}, model_type
        assert not SIZE_FIELDS & table.keys(), model_type


def test_gemma3_text_config_takes_the_class_max_position_embeddings() -> None:
    config = get_model("gemma-3-27b-it").config_dict()
    assert "max_position_embeddings" not in config["text_config"]  # type: ignore[operator]
    shape = shape_from_config(config)
    assert shape.max_position_embeddings == 131072 and shape.vocab_size == 262208
    assert any("max_position_embeddings not in config.json: 131072" in n and "gemma3_text" in n for n in shape.notes)


def test_kv_bytes_on_the_real_gemma3_27b_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "gemma-3-27b-it.json"
    path.write_text(json.dumps(get_model("gemma-3-27b-it").config_dict()))
    assert main(["kv-bytes", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max_model_len"] == 131072


def mistral(**extra: Any) -> dict[str, Any]:
    return {"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 4096,
            "intermediate_size": 14336, "num_hidden_layers": 4, "num_attention_heads": 32,
            "torch_dtype": "bfloat16", "max_position_embeddings": 32768, **extra}  # fmt: skip


def test_absent_fields_take_the_class_default_and_explicit_null_stays_null() -> None:
    absent = shape_from_config(mistral())
    assert absent.num_kv_heads == 8 and absent.vocab_size == 32000 and absent.sliding_window == 4096
    explicit = shape_from_config(mistral(sliding_window=None, num_key_value_heads=32))
    assert explicit.sliding_window is None and explicit.num_kv_heads == 32


def test_size_fields_are_still_required() -> None:
    from app.core.errors import InputError

    with pytest.raises(InputError) as err:
        shape_from_config({k: v for k, v in mistral().items() if k != "hidden_size"})
    assert err.value.field == "model.config.hidden_size"


def _mistral3(text: dict[str, Any]) -> dict[str, Any]:
    """A Mistral-3 (Mistral-Small-3.1 style) multimodal config: its text_config is read with MistralConfig."""
    return {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3", "torch_dtype": "bfloat16",
            "image_token_index": 10, "spatial_merge_size": 2, "projector_hidden_act": "gelu",
            "vision_config": {"model_type": "pixtral", "hidden_size": 1024, "num_hidden_layers": 24,
                              "num_attention_heads": 16, "intermediate_size": 4096, "patch_size": 14,
                              "image_size": 1540},
            "text_config": text}  # fmt: skip


@pytest.mark.parametrize("model_type", ["mistral", "mixtral", "ministral", "llama4_text"])
def test_the_4096_times_32_defaults_are_in_the_table(model_type: str) -> None:
    # transformers 5.24.0 models/{mistral,mixtral,ministral,llama4}/configuration_*.py:
    # `max_position_embeddings: int = 4096 * 32`, an expression scripts/transformers_defaults.py dropped
    assert CLASS_DEFAULTS[model_type]["max_position_embeddings"] == 131072
    assert PINNED["defaults"][model_type]["max_position_embeddings"] == 131072


def test_a_mistral3_text_config_without_the_length_takes_mistrals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = {"hidden_size": 5120, "intermediate_size": 32768, "num_hidden_layers": 40, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 131072, "rope_theta": 1000000000.0,
            "sliding_window": None, "rms_norm_eps": 1e-05}  # fmt: skip
    path = tmp_path / "mistral3.json"
    path.write_text(json.dumps(_mistral3(text)))
    assert main(["kv-bytes", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max_model_len"] == 131072  # MistralConfig's 4096 * 32, not "assumed 2048"
    shape = shape_from_config(_mistral3(text))
    assert any("max_position_embeddings not in config.json: 131072" in n and "mistral" in n for n in shape.notes)


def test_a_llama4_text_config_without_the_length_takes_llama4_texts() -> None:
    config = get_model("llama-4-scout-17b-16e").config_dict()
    own = config["text_config"]
    assert isinstance(own, dict)
    text = {k: v for k, v in own.items() if k != "max_position_embeddings"}
    shape = shape_from_config({**config, "text_config": text})
    assert shape.max_position_embeddings == 131072

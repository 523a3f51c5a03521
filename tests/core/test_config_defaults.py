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

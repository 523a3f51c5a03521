"""The warning vLLM logs when it starts with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 and a max_model_len above
the model's derived length is read into the imported document's engine.allow_long_max_model_len, so the
plan of that run (and its deploy files) carries the variable.

No real log with this warning is in tests/data: every log text here is built from vLLM's exact format
strings, with vLLM's own %-formatting, and the import test places one such line into public/58's text.
- vllm/config.py @825b04486 (#7080, 2024-08-03) to vllm/config/__init__.py @1cb39dbcd:
  ``logger.warning("%s Make sure the value is correct and within the model context size.", msg)``
- vllm/config/model.py @28be48fa9 (since 55602bb2e, #20904, 2025-09-01):
  ``logger.warning_once("%s %s", msg, warning)``
The refusal of an unset variable (``raise ValueError(f"{msg} To allow overriding this maximum, ...")``)
states the same msg and is not read as the variable.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.core.exports import env_of
from app.ingest.catalogue import get_model
from app.ingest.vllm_log import parse_vllm_log
from app.ingest.vllm_log_model import log_parse_to_json
from app.services import imports, plans

PUBLIC = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "public"
LOG_58 = PUBLIC / "58-v01011-qwen2-7b-a100-80gb-tp1-util025-wrapped.log"
KV_LINE = "INFO 09-03 00:37:00 [gpu_worker.py:276] Available KV cache memory: 5.01 GiB\n"


def _msg_v1(max_model_len: int, key: str, derived: object, model_max_length: object) -> str:
    """`msg` as vllm/config.py @825b04486 builds it (the same text to @1cb39dbcd)."""
    return (
        f"User-specified max_model_len ({max_model_len}) is greater "
        f"than the derived max_model_len ({key}="
        f"{derived} or model_max_length="
        f"{model_max_length} in model's config.json). This may lead "
        "to incorrect model outputs or CUDA errors."
    )


def _msg_v2(max_model_len: int, key: str, derived: object, model_max_length: object) -> str:
    """`msg` as vllm/config/model.py @28be48fa9 builds it."""
    return (
        f"User-specified max_model_len ({max_model_len}) is greater "
        f"than the derived max_model_len ({key}="
        f"{derived} or model_max_length="
        f"{model_max_length} in model's config.json)."
    )


WARNING_V2 = (
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme "
    "caution. If the model uses relative position encoding (RoPE), "
    "positions exceeding derived_max_model_len lead to nan. If the "
    "model uses absolute position encoding, positions exceeding "
    "derived_max_model_len will cause a CUDA array out-of-bounds "
    "error."
)


def _warned_v1(max_model_len: int, key: str, derived: object) -> str:
    text = "%s Make sure the value is correct and within the model context size." % _msg_v1(  # noqa: UP031
        max_model_len, key, derived, None)
    return f"WARNING 09-04 01:02:37 [__init__.py:3027] {text}"


def _warned_v2(max_model_len: int, key: str, derived: object) -> str:
    text = "%s %s" % (_msg_v2(max_model_len, key, derived, None), WARNING_V2)  # noqa: UP031
    return f"(APIServer pid=1) WARNING 05-24 08:14:51 [model.py:2209] {text}"


def _refused_v1(max_model_len: int, key: str, derived: object) -> str:
    msg = _msg_v1(max_model_len, key, derived, None)
    return f"ValueError: {msg} To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"


def _refused_v2(max_model_len: int, key: str, derived: object) -> str:
    msg = _msg_v2(max_model_len, key, derived, None)
    return (f"ValueError: {msg} To allow overriding this maximum, set "
            f"the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. {WARNING_V2}")


def _settings(text: str) -> dict[str, Any]:
    runs = json.loads(json.dumps(log_parse_to_json(parse_vllm_log(text))))["runs"]
    settings: dict[str, Any] = runs[0]["settings"]
    return settings


@pytest.mark.parametrize("line", [
    _warned_v1(65536, "max_position_embeddings", 40960),
    _warned_v2(65536, "max_position_embeddings", 40960),
    _warned_v2(262144, "max_position_embeddings", 131072.0),  # a RoPE-scaled length is a float in vLLM
])
def test_the_warning_states_the_variable(line: str) -> None:
    assert _settings(line + "\n" + KV_LINE)["allow_long_max_model_len"] is True


@pytest.mark.parametrize("line", [_refused_v1(65536, "max_position_embeddings", 40960),
                                  _refused_v2(65536, "max_position_embeddings", 40960)])
def test_the_refusal_does_not(line: str) -> None:
    assert _settings(line + "\n" + KV_LINE)["allow_long_max_model_len"] is None


def test_no_warning_no_value() -> None:
    assert _settings(KV_LINE)["allow_long_max_model_len"] is None


def test_the_imported_run_plans_and_deploys_with_the_variable() -> None:
    """public/58 (v0.10.1.1, vllm/config/__init__.py's wording) with the warning placed after its
    'Resolved architecture' line; the numbers are the run's own max_model_len (16384) against a
    derived length stated in the line (8192), as no real log of such a start is at hand."""
    text = LOG_58.read_text(encoding="utf-8")
    anchor = "Resolved architecture: Qwen2ForCausalLM\n"
    assert anchor in text
    line = "(APIServer pid=1671) " + _warned_v1(16384, "max_position_embeddings", 8192) + "\n"
    config = get_model("qwen2.5-7b-instruct").config_dict()
    for with_line, expected in ((True, True), (False, False)):
        given = text.replace(anchor, anchor + line, 1) if with_line else text
        _, docs = imports.read_log(given, config)
        doc, error = docs[0]
        assert doc is not None, error
        assert doc["engine"]["allow_long_max_model_len"] is expected
        result = plans.run_plan(doc, with_levers=False)
        assert result["engine"]["allow_long_max_model_len"] is expected
        assert (env_of(result).get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") == "1") is expected

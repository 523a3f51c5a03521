"""Block sizes vLLM refuses are refused with vLLM's rule; flags are shell-quoted (issue 17, item 13)."""

from __future__ import annotations

import shlex

import pytest

from app.core.errors import InputError
from app.services.plans import run_plan


def doc(block_size: int, version: str = "0.27.1", name: str | None = None) -> dict[str, object]:
    model: dict[str, object] = {"kv_bytes_per_token": 131072}
    if name is not None:
        model["name"] = name
    return {"model": model, "engine": {"max_model_len": 4096, "block_size": block_size},
            "ranks": [{"kv_room": "40 GiB"}], "vllm_version": version}  # fmt: skip


@pytest.mark.parametrize("block_size", [7, 8, 24, 100])
def test_not_a_multiple_of_16_is_refused(block_size: int) -> None:
    with pytest.raises(InputError) as err:
        run_plan(doc(block_size), with_levers=False)
    assert err.value.field == "engine.block_size" and "multiple of 16" in err.value.message


@pytest.mark.parametrize("block_size", [16, 32, 48, 544])
def test_multiples_of_16_are_accepted_from_018(block_size: int) -> None:
    assert run_plan(doc(block_size), with_levers=False)["block_size"] == block_size


def test_before_018_only_the_literal_sizes() -> None:
    assert run_plan(doc(128, "0.10.2"), with_levers=False)["block_size"] == 128
    with pytest.raises(InputError) as err:
        run_plan(doc(48, "0.10.2"), with_levers=False)
    assert "1, 8, 16, 32, 64, 128, 256" in err.value.message


def test_model_name_is_shell_quoted() -> None:
    name = "/models/org model; rm -rf ~ $(x)"  # a local path vLLM can load, however odd its name
    flags = run_plan(doc(16, name=name), with_levers=False)["flags"]
    model_flag = next(f for f in flags if f.startswith("--model "))
    assert shlex.split(model_flag) == ["--model", name]
    # Not a repo id nor a path: a label, never a --model (issue 17).
    flags = run_plan(doc(16, name="org/model; rm -rf ~ $(x)"), with_levers=False)["flags"]
    assert not [f for f in flags if f.startswith("--model")]

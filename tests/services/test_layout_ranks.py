"""A layout that disagrees with the ranks given is refused naming both (issue 17, item 18)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.core.errors import InputError
from app.services.plans import run_plan

README = Path(__file__).parents[2] / "README.md"
ROWS = {"total": "80 GiB", "weights": "18 GiB", "non_torch": "4 GiB", "activation": "3 GiB", "cuda_graphs": "3 GiB"}


def doc(tp: int, n: int, pp: int = 1, dp: int = 1) -> dict[str, object]:
    return {
        "model": {"kv_bytes_per_token": 131072},
        "layout": {"tp": tp, "pp": pp, "dp": dp},
        "engine": {"max_model_len": 8192},
        "ranks": [dict(ROWS) for _ in range(n)],
    }


@pytest.mark.parametrize(("tp", "pp", "dp", "n"), [(4, 1, 1, 2), (2, 2, 1, 3), (2, 1, 3, 4), (8, 1, 1, 1)])
def test_mismatch_is_refused_naming_both(tp: int, pp: int, dp: int, n: int) -> None:
    with pytest.raises(InputError) as err:
        run_plan(doc(tp, n, pp, dp), with_levers=False)
    assert err.value.field == "ranks"
    assert f"{n} ranks entries" in err.value.message and f"tp={tp}" in err.value.message


WHOLE = [(4, 1, 1, 4), (2, 2, 1, 4), (2, 1, 3, 6), (2, 1, 3, 2), (1, 1, 1, 3)]


@pytest.mark.parametrize(("tp", "pp", "dp", "n"), WHOLE)
def test_whole_replicas_are_accepted(tp: int, pp: int, dp: int, n: int) -> None:
    result = run_plan(doc(tp, n, pp, dp), with_levers=False)
    assert len(result["ranks"]) == n


def test_readme_example_is_a_plan_that_runs() -> None:
    block = re.search(r"A plan document.*?```json\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    example = json.loads(block.group(1))
    assert len(example["ranks"]) == example["layout"]["tp"] * example["layout"].get("pp", 1)
    result = run_plan(example, with_levers=False)
    assert [r["index"] for r in result["ranks"]] == list(range(len(example["ranks"])))


def estimated(tp: int, pp: int, count: int, dp: int = 1) -> dict[str, object]:
    return {"model": {"catalogue": "llama-3.1-70b"}, "layout": {"tp": tp, "pp": pp, "dp": dp},
            "gpu": {"name": "H100 80GB", "count": count}}


@pytest.mark.parametrize(("tp", "pp", "dp", "count"), [(8, 2, 1, 8), (4, 1, 1, 2), (4, 1, 2, 6), (2, 2, 1, 6)])
def test_a_gpu_count_that_is_not_whole_engines_is_refused(tp: int, pp: int, dp: int, count: int) -> None:
    # TP8 × PP2 with 8 GPUs kept stage 0 only and planned 3,204,864 tokens (the binding stage 1 dropped)
    with pytest.raises(InputError) as err:
        run_plan(estimated(tp, pp, count, dp), with_levers=False)
    assert err.value.field == "gpu.count"
    assert f"{count} GPUs do not make whole engines of tp={tp} × pp={pp} = {tp * pp} workers" in err.value.message


def test_a_gpu_count_of_whole_engines_plans_every_stage() -> None:
    full = run_plan(estimated(8, 2, 16), with_levers=False)
    assert len(full["ranks"]) == 16 and full["tokens"] == run_plan(
        {**estimated(8, 2, 16), "gpu": {"name": "H100 80GB"}}, with_levers=False)["tokens"]
    assert len(run_plan(estimated(4, 1, 8), with_levers=False)["ranks"]) == 8  # two replicas

"""Issue 17 item 2: ranks of an imported run that print only their budget line.

Real text: tests/data/vllm-logs/public/30, the first six lines of the log in
vllm-project/vllm#13074 (Icedcocon, 2025-02-10): DeepSeek-R1 on two nodes of 8 × H20-3e
(139.72 GiB), TP8 × PP2 on Ray, vLLM 0.7.2; the driver prints its three profiling lines, the
worker pid=3151 only "Memory profiling takes" and its budget line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.core.errors import InputError
from app.ingest.catalogue import get_model
from app.services import imports, plans

GIB = 2**30
PUBLIC = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "public"
LOG = PUBLIC / "30-v072-deepseek-r1-h20-141gb-ray-tp8-pp2-driver-rows-worker-budget.log"


def _doc(**layout: int) -> dict[str, Any]:
    config = get_model("deepseek-r1").config_dict()
    _, docs = imports.read_log(LOG.read_text(encoding="utf-8"), config, layout or None)
    doc, error = docs[0]
    assert doc is not None, error
    return doc


def _plan(**layout: int) -> dict[str, Any]:
    return plans.run_plan(_doc(**layout), with_levers=False)


def test_layout_unknown_leaves_the_rowless_rank_out_and_asks_for_the_layout() -> None:
    out = _plan()
    assert [r["rank"] for r in out["ranks"]] == ["driver"]
    driver = out["ranks"][0]
    assert driver["weights_bytes"] == round(39.66 * GIB) and driver["sources"]["weights_bytes"] == "measured"
    assert driver["kv_bytes"] == round(97.29 * GIB)
    note = next(n for n in out["notes"] if "pid=3151" in n)
    assert "left out" in note and "does not state the layout" in note and "TP and PP" in note
    assert any("2 workers but states no layout" in n for n in out["notes"])
    assert not any(w["code"] in ("estimated_rows", "no_kv_memory") for w in out["warnings"])
    assert not any("import a" in w["message"].lower() for w in out["warnings"])


def test_the_stated_layout_tp8_pp2_keeps_the_worker_unknown_and_sizes_the_driver_at_its_stage() -> None:
    doc = _doc(tp=8, pp=2)
    assert doc["layout"]["tp"] == 8 and doc["layout"]["pp"] == 2 and doc["ranks_partial"] is True
    out = plans.run_plan(doc, with_levers=False)
    assert [r["rank"] for r in out["ranks"]] == ["driver"]
    assert any("pid=3151" in n and "which of the 2 pipeline stages" in n for n in out["notes"])
    assert not any("states no layout" in n for n in out["notes"])
    # one stage holds 31 of R1's 61 layers: about twice the tokens of the whole-model TP1 reading
    one_stage = _plan()["raw_tokens"]
    assert 1.9 < out["raw_tokens"] / one_stage < 2.1


def test_one_pipeline_stage_takes_the_rows_of_the_measured_rank_of_the_run() -> None:
    """Had the run been one stage (PP1 given), the worker's rows are the driver's: same budget rule."""
    out = _plan(tp=8, pp=1)
    by = {r["rank"]: r for r in out["ranks"]}
    assert set(by) == {"driver", "pid=3151"}
    worker = by["pid=3151"]
    for key in ("weights_bytes", "non_torch_bytes", "activation_bytes", "kv_bytes"):
        assert worker[key] == by["driver"][key] and worker["sources"][key] == "measured"
    assert any("pid=3151" in n and "driver" in n and "same pipeline stage" in n for n in out["notes"])


def test_no_rank_of_an_imported_run_gets_a_whole_model_estimate() -> None:
    for layout in ({}, {"tp": 8, "pp": 1}, {"tp": 8, "pp": 2}, {"tp": 1}):
        for rank in _plan(**layout)["ranks"]:
            assert rank["weights_bytes"] < 100 * GIB, (layout, rank)
            assert "estimated" not in rank["sources"].values(), (layout, rank)


def test_a_partial_ranks_list_never_holds_more_entries_than_workers() -> None:
    doc = _doc(tp=8, pp=1)
    doc["layout"] = {"tp": 1}
    with pytest.raises(InputError) as err:
        plans.run_plan(doc, with_levers=False)
    assert err.value.field == "ranks" and "more than the 1 workers" in err.value.message


def test_a_log_of_budget_lines_only_is_refused_not_estimated() -> None:
    """public/04 (vllm#11550): the worker prints its budget only and no rank prints a KV room."""
    text = next(PUBLIC.glob("04-*.log")).read_text(encoding="utf-8")
    _, docs = imports.read_log(text, get_model("llama-3.1-8b").config_dict())
    doc, error = docs[0]
    assert doc is None and error is not None and "no rank states its rows" in error


def test_a_tp2_log_printing_one_rank_is_a_partial_list_not_a_refusal() -> None:
    """public/32 (PR #37296): TP0 and TP1 prefixes (TP >= 2), only TP0 states its KV room."""
    text = next(PUBLIC.glob("32-*.log")).read_text(encoding="utf-8")
    _, docs = imports.read_log(text, get_model("llama-3.1-8b").config_dict())
    doc, error = docs[0]
    assert doc is not None, error
    out = plans.run_plan(doc, with_levers=False)
    assert out["layout"]["tp"] == 2 and [r["rank"] for r in out["ranks"]] == ["TP0"]

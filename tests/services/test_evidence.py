"""A vLLM startup log becomes a measured plan; residuals against the model; contradictions found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.ingest.catalogue import get_model
from app.services.imports import import_log, plan_from_log_run
from app.services.plans import run_plan

DATA = Path(__file__).resolve().parents[1] / "data"
LOG14 = DATA / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log"


def test_plan_from_log_file_reproduces_engine_blocks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"from_log": str(LOG14), "model": {"catalogue": "Qwen3-235B-A22B-FP8"}, "layout": {"tp": 8}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert main(["plan", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["ranks"]) == 8
    assert result["blocks"] == 14834  # "num_gpu_blocks is: 14834" in the log
    assert result["tokens"] == 14834 * 16
    assert result["max_concurrency_at_max_model_len"] == pytest.approx(7.24, abs=0.005)
    assert all(r["sources"]["kv_bytes"] == "measured" for r in result["ranks"])
    # the excerpt does not state the version: the log's formats place it at ≥ 0.10.2, < 0.11.0
    assert result["vllm_version"] == "0.10.2"


def test_api_refuses_file_paths() -> None:
    from app.core.errors import InputError

    with pytest.raises(InputError) as err:
        run_plan({"from_log": "/etc/passwd", "model": {"kv_bytes_per_token": 1}})
    assert err.value.field == "from_log" and "command line" in err.value.message


def test_plan_from_parsed_run_with_catalogue_model() -> None:
    parsed = import_log(LOG14.read_text(encoding="utf-8"), get_model("Qwen3-235B-A22B-FP8").config_dict())
    doc = plan_from_log_run(parsed, 0, get_model("Qwen3-235B-A22B-FP8").config_dict())
    assert len(doc["ranks"]) == 8 and doc["layout"]["tp"] == 8
    result = run_plan(doc)
    assert result["blocks"] == 14834
    engine = parsed["runs"][0]["residuals"]["engine"]
    assert engine["residual_blocks"] == 0 and engine["within_printed_precision"] is True


SELF_CONTRADICTING = """\
INFO 01-14 12:36:51 worker.py:241] Memory profiling results: total_gpu_memory=79.15GiB \
initial_memory_usage=36.30GiB peak_torch_memory=41.05GiB memory_usage_post_profile=36.60GiB \
non_torch_memory=0.55GiB kv_cache_size=29.44GiB gpu_memory_utilization=0.90
INFO 01-14 12:36:52 distributed_gpu_executor.py:57] # GPU blocks: 131072, # CPU blocks: 3276
"""


def test_seed003_block_count_that_cannot_fit_is_a_finding() -> None:
    # seed 003: "131,072 blocks per GPU" for Llama-3-70B at TP4 (81,920 B/token) on an 80 GB card
    config = get_model("Llama-3.1-70B").config_dict()
    parsed = import_log(SELF_CONTRADICTING, None)
    run = parsed["runs"][0]
    run["settings"]["tensor_parallel_size"] = 4
    from app.services.evidence import residuals

    res = residuals(run, config)
    codes = [f["code"] for f in res["findings"]]
    assert "blocks_exceed_memory" in codes
    assert res["engine"]["logged_blocks"] == 131072
    expected = round(29.44 * 2**30) // (16 * 81920)  # what 29.44 GiB really holds at TP4
    assert abs(res["engine"]["computed_blocks"] - expected) <= res["engine"]["tolerance_blocks"]


@pytest.mark.parametrize(
    ("given", "whatif"),
    [
        ({"engine": {"gpu_memory_utilization": 0.95}}, {"gpu_memory_utilization": 0.95}),
        ({"engine": {"max_num_batched_tokens": 4096}}, None),  # the log does not state it: the run's value
        ({"layout": {"tp": 4}}, {"tp": 4}),
        ({"engine": {"gpu_memory_utilization": 0.9}, "layout": {"tp": 8}}, None),  # the logged values: no what-if
    ],
)
def test_settings_given_with_a_log_that_differ_from_the_run_are_what_ifs(
    given: dict[str, object], whatif: dict[str, object] | None
) -> None:
    from app.schemas import validate_plan
    from app.services.evidence import document_from_log

    doc = document_from_log(validate_plan({"from_log": {"text": LOG14.read_text()}, **given}), None)
    assert doc.engine.gpu_memory_utilization == 0.9 and doc.layout.tp == 8  # the run's own settings
    assert (doc.whatif.model_dump(exclude_none=True) if doc.whatif else None) == whatif
    moved = run_plan({"from_log": {"text": LOG14.read_text()}, **given}, with_levers=False)
    logged = run_plan({"from_log": {"text": LOG14.read_text()}}, with_levers=False)
    assert (moved["ranks"] == logged["ranks"]) is (whatif is None)


def test_a_logged_prefill_chunk_given_otherwise_is_a_what_if() -> None:
    from app.schemas import validate_plan
    from app.services.evidence import document_from_log

    parsed = import_log(LOG14.read_text(encoding="utf-8"))
    parsed["runs"][0].setdefault("settings", {})["max_num_batched_tokens"] = 8192  # as a log stating it would
    doc = document_from_log(validate_plan({"from_log": parsed, "engine": {"max_num_batched_tokens": 2048}}), None)
    assert doc.engine.max_num_batched_tokens == 8192
    assert doc.whatif is not None and doc.whatif.max_num_batched_tokens == 2048


def test_a_tp_degree_only_inferred_from_worker_prefixes_yields_to_the_document() -> None:
    # Log 14 without the TP4–TP7 lines: the prefixes say "at least TP4"; the document says TP8.
    text = "\n".join(line for line in LOG14.read_text().splitlines() if not any(f"TP{i}_" in line for i in range(4, 8)))
    doc = {"from_log": {"text": text}, "model": {"catalogue": "Qwen3-235B-A22B-FP8"}, "layout": {"tp": 8}}
    result = run_plan(doc, with_levers=False)
    assert result["layout"]["tp"] == 8 and len(result["ranks"]) == 4
    assert all(r["sources"]["kv_bytes"] == "measured" for r in result["ranks"])


def test_null_settings_next_to_a_log_take_the_logged_values() -> None:
    doc = {"from_log": {"text": LOG14.read_text()}, "engine": {"gpu_memory_utilization": None, "max_num_seqs": None}}
    assert run_plan(doc, with_levers=False)["engine"]["gpu_memory_utilization"] == 0.9


def test_a_run_with_online_fp8_keeps_it() -> None:
    from app.ingest.catalogue import get_model as catalogue_model

    log = (DATA / "vllm-logs" / "01-v064-llama31-8b-rtx3090-tp1.log").read_text()
    parsed = import_log(log)
    parsed["runs"][0].setdefault("settings", {})["quantization"] = "fp8"  # as `--quantization fp8` prints
    doc = {"from_log": parsed, "model": {"config": catalogue_model("llama-3.1-8b").config_dict()}}
    result = run_plan(doc)
    plain = run_plan({**doc, "from_log": import_log(log)})
    assert result["engine"]["quantization"] == "fp8" and "--quantization fp8" in result["flags"]
    assert "quantization" not in {lv["knob"] for lv in result["levers"]}  # already fp8: nothing to gain
    assert "quantization" in {lv["knob"] for lv in plain["levers"]}
    assert [r["weights_bytes"] for r in result["ranks"]] == [r["weights_bytes"] for r in plain["ranks"]]  # as measured


def test_an_import_looks_models_up_exactly_never_by_the_close_match_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The close-match search (a difflib pass over the catalogue) ran twice per run of a log whose
    model is not catalogued: most of `import-log`'s time on a long log. An import needs the exact
    lookup only; the catalogued model is still found, an unknown one is simply not."""
    from app.ingest import catalogue
    from app.services.evidence import catalogue_config_for

    def no_search(key: str, n: int = 5) -> list[str]:
        raise AssertionError(f"close-match search for {key!r} during an import")

    monkeypatch.setattr(catalogue, "_suggestions", no_search)
    entry = get_model("llama-3.1-8b")
    found = catalogue_config_for(entry.hf_id)
    assert found is not None and found[0] == entry.slug
    assert catalogue_config_for("someone/not-a-catalogued-model") is None
    text = (DATA / "vllm-logs" / "23-v0240-tp1-cg-pool-actual-vs-estimated.log").read_text()  # model /workspace/base
    parsed = import_log(text * 3)
    assert parsed["runs"] and all(r["settings"]["model"] == "/workspace/base" for r in parsed["runs"])
    assert all(r["catalogue_model"] is None for r in parsed["runs"])


@pytest.mark.parametrize(
    ("log", "slug"),
    [
        ("35-v0190-gpt-oss-20b-h100-tp2-util090.log", "gpt-oss-20b"),
        ("36-v0190-llama4-scout-h100-tp4.log", "llama-4-scout-17b-16e"),
        ("53-v0190-gpt-oss-20b-h100-tp2-sampler-oom-after-kv.log", "gpt-oss-20b"),
    ],
)
def test_blocks_within_the_printed_kv_figure_are_not_a_contradiction(log: str, slug: str) -> None:
    """These runs started and state more tokens than their KV figure, rounded to 0.01 GiB, holds (3-15 blocks, within
    the 56-111 blocks that 0.005 GiB is): the memory vLLM divided was up to that much larger, so no finding; the
    residual is within printed precision."""
    text = (DATA / "vllm-logs" / log).read_text(encoding="utf-8")
    run = import_log(text, get_model(slug).config_dict())["runs"][0]
    engine = run["residuals"]["engine"]
    assert engine["residual_blocks"] < 0 and engine["within_printed_precision"] is True
    assert "blocks_exceed_memory" not in [f["code"] for f in run["residuals"]["findings"]]


def test_blocks_beyond_the_printed_precision_are_still_a_contradiction() -> None:
    """Log 35's KV figure (59.32 GiB, so up to 59.325 GiB: 27 blocks of 192 KiB more): a block count 10 over what
    the printed figure holds is within it (flagged before), one 40 over is not."""
    from app.services.evidence import residuals

    text = (DATA / "vllm-logs" / "35-v0190-gpt-oss-20b-h100-tp2-util090.log").read_text(encoding="utf-8")
    config = get_model("gpt-oss-20b").config_dict()
    run = import_log(text, config)["runs"][0]
    computed = residuals(run, config)["engine"]["computed_blocks"]
    found = {}
    for extra in (10, 40):
        run["engine"]["num_gpu_blocks"] = computed + extra
        found[extra] = "blocks_exceed_memory" in [f["code"] for f in residuals(run, config)["findings"]]
    assert found == {10: False, 40: True}

"""`kvledger` bad input: exit code 2 and one line naming the field; never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main

GOOD = {
    "model": {"kv_bytes_per_token": 131072},
    "engine": {"max_model_len": 8192, "gpu_memory_utilization": 0.9},
    "ranks": [
        {"total": "80 GiB", "weights": "18 GiB", "non_torch": "4 GiB", "cuda_graphs": "3 GiB", "activation": "3 GiB"}
    ],
}


def write(tmp_path: Path, obj: object, name: str = "plan.json") -> str:
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def err_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize(
    ("mutate", "field", "needle"),
    [
        (lambda d: d["ranks"][0].update(total="80 GiBB"), "ranks[0].total", "unknown unit"),
        (lambda d: d["ranks"][0].update(weights="-3 GiB"), "ranks[0].weights", "negative"),
        (lambda d: d["engine"].update(gpu_memory_utilization=1.5), "engine.gpu_memory_utilization",
         "gpu_memory_utilization 1.5 is out of range: give a fraction in (0, 1]"),
        (lambda d: d["engine"].update(block_size="big"), "engine.block_size", "integer"),
        (lambda d: d.update(layout={"tp": 0}), "layout.tp",
         "tp 0 is out of range: give a whole number from 1 to 4,096"),
        (lambda d: d["ranks"][0].update(totl="80 GiB"), "ranks[0].totl", "unknown field"),
        (lambda d: d.update(model={}), "model", "exactly one of"),
        (lambda d: d["engine"].pop("max_model_len"), "engine.max_model_len", "required"),
        (lambda d: d["engine"].update(kv_cache_dtype="fp9"), "engine.kv_cache_dtype", "fp9"),
    ],
)
def test_bad_plan_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate, field: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(json.dumps(GOOD))
    mutate(doc)
    assert main(["plan", write(tmp_path, doc), "--json"]) == 2
    line = err_line(capsys)
    assert field in line and needle in line, line


def test_tp_not_dividing_heads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = json.loads((Path(__file__).parents[1] / "data" / "configs" / "llama31-8b.json").read_text())
    doc = {"model": {"config": config}, "layout": {"tp": 3}, "gpu": {"total": "80 GiB"}}
    assert main(["plan", write(tmp_path, doc), "--json"]) == 2
    line = err_line(capsys)
    assert "tp" in line and "32" in line, line


def test_unreadable_and_invalid_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in err_line(capsys)
    assert main(["plan", str(tmp_path)]) == 2
    assert "directory" in err_line(capsys)
    assert main(["plan", write(tmp_path, "{not json")]) == 2
    assert "line 1, column 2" in err_line(capsys)
    assert main(["plan", write(tmp_path, [1, 2])]) == 2
    assert "JSON object" in err_line(capsys)
    assert main(["kv-bytes", write(tmp_path, "[]", "c.json")]) == 2
    assert "JSON object" in err_line(capsys)


def test_oversized_file_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.log"
    with big.open("wb") as fh:
        fh.truncate(21 * 1024 * 1024)
    assert main(["import-log", str(big)]) == 2
    assert "larger than 20 MB" in err_line(capsys)


def test_plan_table_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", write(tmp_path, GOOD)]) == 0
    out = capsys.readouterr().out
    assert "44.00 GiB" in out and "binding rank 0" in out and "--gpu-memory-utilization" in out
    assert "concurrency ceiling None" not in out
    assert "lever gpu_memory_utilization" in out  # the levers, with their token gains


def test_plan_table_says_what_a_lever_would_break(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = Path(__file__).parents[1] / "data" / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"from_log": str(log)}))
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    lever = next(line for line in out.splitlines() if line.startswith("lever gpu_memory_utilization 0.9 → 0.93"))
    assert "CUDA graphs (3.45 GiB) are captured outside the budget" in lever and "(and 7 more ranks)" in lever
    assert "note: model given as bytes per token per rank" in out


def test_kv_bytes_keys(capsys: pytest.CaptureFixture[str]) -> None:
    config = Path(__file__).parents[1] / "data" / "configs" / "qwen3-235b-a22b-fp8.json"
    assert main(["kv-bytes", str(config), "--tp", "8", "--max-model-len", "32768", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("kv_bytes_per_token", "kv_heads_per_rank", "page_bytes", "per_request_bytes"):
        assert key in out
    assert out["kv_heads_per_rank"] == 1  # 4 KV heads at TP8: replicated, not 0.5
    assert out["kv_bytes_per_token"] == 2 * 94 * 1 * 128 * 2


@pytest.mark.parametrize(
    ("flag", "field"), [("--max-model-len", "max_model_len"), ("--max-num-batched-tokens", "max_num_batched_tokens")]
)
def test_kv_bytes_zero_is_refused_not_defaulted(flag: str, field: str, capsys: pytest.CaptureFixture[str]) -> None:
    # 0 was read as "not given": the report showed the config's 131,072 (or 8,192) and exit 0
    config = Path(__file__).parents[1] / "data" / "configs" / "qwen3-235b-a22b-fp8.json"
    assert main(["kv-bytes", str(config), flag, "0", "--json"]) == 2
    line = err_line(capsys)
    # named by the option as written, with its range and what it is read as
    assert line.startswith(f"kvledger: error: {flag} 0 is out of range: give a whole number from 1 to "), line
    assert line.endswith(f"(read as engine.{field})"), line


# --- a hard byte cap on every read (issue 12 item 4) --------------------------------------------


def test_endless_files_are_refused_after_the_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-log", "/dev/zero"]) == 2
    assert "larger than 20 MB" in capsys.readouterr().err
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps({"from_log": "/dev/zero", "model": {"catalogue": "llama-3.1-8b"}}))
    assert main(["plan", str(doc)]) == 2
    assert "larger than 20 MB" in capsys.readouterr().err


def test_serve_flags_the_plan_does_not_model_are_said_to_be_left_out_of_every_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the note said "kept for deployment" while every export dropped --swap-space / --disable-log-requests
    doc = {"serve": "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2 --swap-space 8 --disable-log-requests",
           "vllm_version": "0.10.2", "gpu": {"name": "L40S 48GB"}}
    path = write(tmp_path, doc)
    assert main(["plan", path, "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    note = next(n for n in notes if "--swap-space" in n)
    assert "not in its flags or exports" in note and "kept" not in note
    for fmt in ("serve", "vllm-config", "kserve", "production-stack", "llm-d", "csv"):
        assert main(["export", path, "--format", fmt]) == 0
        text = capsys.readouterr().out
        assert "swap-space" not in text and "disable-log-requests" not in text, fmt


def test_import_metrics_beside_a_plan_of_other_settings_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = Path(__file__).parents[1] / "data" / "metrics" / "vllm-0.11-cache-config-engine.prom"
    plan = write(tmp_path, {"model": {"catalogue": "qwen3-8b"}, "gpu": {"total": "48 GiB"},
                            "engine": {"gpu_memory_utilization": 0.9, "kv_cache_dtype": "fp8_e4m3"}})
    assert main(["import-metrics", str(metrics), "--json", "--plan", plan]) == 0
    compared = json.loads(capsys.readouterr().out)["replicas"][0]["plan"]
    fields = [d["field"] for d in compared["settings_differ"]]
    assert fields == ["kv_cache_dtype", "gpu_memory_utilization"]
    assert "not the plan's to compare" in compared["settings_note"]


@pytest.mark.parametrize(
    ("lengths", "flags", "field", "said"),
    [
        ([100, 17], ["--block-size", "99999999999"], "block_size", "1 … 4,096"),
        ([100, 0], [], "lengths[1]", "1 … 1,000,000,000"),
        ([10**30], [], "lengths[0]", "1 … 1,000,000,000"),
    ],
)
def test_padding_refuses_numbers_out_of_range_naming_the_field(
    lengths: list[int], flags: list[str], field: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a block of 99,999,999,999 tokens (or a 10**30-token sequence) was computed as given, exit 0
    assert main(["padding", write(tmp_path, lengths, "lengths.json"), *flags]) == 2
    line = err_line(capsys)
    assert field in line and said in line


def test_import_metrics_names_samples_it_does_not_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A NaN usage and an infinite DCGM free MiB were a traceback; now the text names them."""
    path = tmp_path / "m.prom"
    path.write_text('vllm:cache_config_info{block_size="16"} 1\nvllm:kv_cache_usage_perc NaN\n'
                    'DCGM_FI_DEV_FB_FREE{gpu="0"} +Inf\nDCGM_FI_DEV_FB_USED{gpu="0"} 5\n', encoding="utf-8")
    assert main(["import-metrics", str(path)]) == 0
    out = capsys.readouterr().out
    assert "not used: vllm:kv_cache_usage_perc nan: not a finite number" in out
    assert 'not used: DCGM_FI_DEV_FB_FREE{gpu="0"} inf: not a finite number' in out
    assert "GPU 0 : free ?" in out


def test_import_metrics_names_each_mig_instance(capsys: pytest.CaptureFixture[str]) -> None:
    """DCGM on an A30 split by MIG printed 'GPU 0 NVIDIA A30: free 5.87 GiB' four times (the page says
    '(MIG 3)'): four lines no reader could tell apart."""
    metrics = Path(__file__).parents[1] / "data" / "metrics" / "dcgm-a30-mig.prom"
    assert main(["import-metrics", str(metrics)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("GPU ")]
    assert len(lines) == len(set(lines)) >= 4 and all("(MIG " in line for line in lines)

"""`kvledger size FILE|- [--json]`: the table, the JSON contract, exit statuses."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from app.cli import main
from app.services.sizing import run_size

DOC = {"model": {"catalogue": "llama-3.1-8b"}, "target": {"max_model_len": 8192, "concurrency": 32},
       "gpus": ["L4 24GB", "A100 80GB"], "max_gpus": 4}  # fmt: skip


def _write(tmp_path: Path, doc: object) -> str:
    path = tmp_path / "size.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_json_is_the_service_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", _write(tmp_path, DOC), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == run_size(DOC)


def test_table_lists_options_flags_urls_and_near_misses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", _write(tmp_path, DOC)]) == 0
    out = capsys.readouterr().out
    first = run_size(DOC)["options"][0]
    assert out.splitlines()[0] == run_size(DOC)["message"]
    assert " ".join(first["flags"]) in out and first["url"] in out and "searched " in out


def test_stdin_and_no_option_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {**DOC, "gpus": ["L4 24GB"], "max_gpus": 1, "target": {"max_model_len": 8192, "concurrency": 5000}}
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(doc).encode())))
    assert main(["size", "-"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("no deployment within max_gpus=1") and "near miss:" in out


def test_bad_input_exits_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", _write(tmp_path, {**DOC, "gpus": ["H100 90GB"]})]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvledger: error: gpus[0]: unknown GPU 'H100 90GB'") and "nearest" in err
    assert main(["size", _write(tmp_path, [1])]) == 2
    assert "a sizing document must be a JSON object" in capsys.readouterr().err


def test_shared_card_rows_say_how_many_processes_run_the_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four Llama-3.2-1B engines on one H200 are four `vllm serve` processes with the same flags
    (vLLM's DP ranks never share a GPU), not one process with --data-parallel-size 4."""
    doc = {"model": {"catalogue": "llama-3.2-1b"}, "target": {"max_model_len": 8192, "concurrency": 16},
           "gpus": ["H200 141GB"], "max_gpus": 1,
           "options": {"engines_per_gpu": [4], "kv_cache_dtype": ["auto"], "quantization": [None]}}  # fmt: skip
    assert main(["size", _write(tmp_path, doc)]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  1 ") and "4 engines/GPU" in line)
    assert lines[at + 1].strip() == "run 4 such vllm serve processes on the same GPUs, each its own --port:"
    assert "--gpu-memory-utilization 0.23" in lines[at + 2] and "--data-parallel-size" not in lines[at + 2]


def test_headroom_reads_as_a_percentage_then_as_a_multiple() -> None:
    from app.core.sizing_answer import headroom_text

    assert headroom_text(0.55) == "+55 %"
    assert headroom_text(0.0) == "+0 %"
    assert headroom_text(8.99) == "+899 %"
    assert headroom_text(9.0) == "10x"  # from ten times the target on: the multiple
    assert headroom_text(4095.0) == "4,096x"  # a 1-request target printed "+409500%"
    assert headroom_text(None) == "-"

"""From v0.15 the API server states its version in its logo, or with VLLM_DISABLE_LOG_LOGO in one
plain line (vllm/entrypoints/utils.py `log_version_and_model`, PR #32796); both replaced
`vLLM API server version %s`. A log that states its version this way must not be read as an
inferred range (file 42, v0.19.1, was read as "≥ 0.18")."""

from __future__ import annotations

from pathlib import Path

from .ingest_helpers import parsed, runs

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"


def test_the_logo_line_states_the_version() -> None:
    (log,) = LOGS.glob("42-*.log")
    (run,) = runs(parsed(log.read_text()))
    assert run["vllm_version"] == "0.19.1"
    assert run["version"]["stated_source"] == "API server"


def test_every_v019_sweep_log_states_its_version() -> None:
    logs = [p for p in LOGS.glob("*-v0190-*.log") if "▀▄▀" in p.read_text()]
    assert len(logs) >= 10
    for log in logs:
        for run in runs(parsed(log.read_text())):
            assert run["vllm_version"] == "0.19.0", log.name


def test_the_plain_line_without_the_logo_states_the_version() -> None:
    text = ("(APIServer pid=7) INFO 01-22 10:00:00 [utils.py:299] vLLM server version 0.15.0, serving model "
            "Qwen/Qwen3-8B\n"
            "(EngineCore pid=9) INFO 01-22 10:00:30 [gpu_worker.py:300] Available KV cache memory: 60.51 GiB\n")
    (run,) = runs(parsed(text))
    assert run["vllm_version"] == "0.15.0"

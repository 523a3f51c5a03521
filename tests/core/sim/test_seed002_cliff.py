"""Seed 002's cliff on its own card: 1,783 blocks of 16 tokens (24 GB, 16.06 GB weights), vLLM's
API-server defaults for a GPU under 70 GiB (max_num_batched_tokens 2048, max_num_seqs 256),
prompts lognormal(6.6, 0.9) clipped to 64…8,192, 70 % sharing a 512-token prefix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.core.sim.io import simulate_from_json

DOC: dict[str, Any] = {
    "pool": {"blocks": 1783, "block_size": 16},
    "scheduler": {"max_num_batched_tokens": 2048, "max_num_seqs": 256},
    "workload": {
        "prompt_tokens": {"lognormal": {"mean": 6.6, "sigma": 0.9}, "min": 64, "max": 8192},
        "output_tokens": {"lognormal": {"mean": 5.0, "sigma": 0.8}, "min": 16, "max": 2048},
        "shared_prefix_tokens": 512,
        "shared_fraction": 0.7,
        "requests_per_level": 1000,
    },
    "ramp": [1, 2, 4, 8, 12, 16, 24, 32, 48, 64],
    "seed": 7,
}


def test_throughput_peaks_then_falls_as_hit_rate_collapses_and_preemptions_start() -> None:
    out = simulate_from_json(DOC)
    levels: list[dict[str, Any]] = out["levels"]  # type: ignore[assignment]
    throughput = [lv["throughput_tokens_per_s"] for lv in levels]
    peak = max(range(len(levels)), key=lambda i: throughput[i])
    assert 0 < peak < len(levels) - 1
    assert throughput[: peak + 1] == sorted(throughput[: peak + 1])  # rises to the peak
    assert throughput[-1] < 0.85 * throughput[peak]  # then falls: more load, less work
    first_preempting = next(i for i, lv in enumerate(levels) if lv["preemptions"] > 0)
    assert first_preempting == peak + 1  # preemptions start where the pool saturates
    assert levels[first_preempting]["kv_usage"] > 0.75
    baseline = levels[0]["prefix_hit_rate"]
    assert all(abs(lv["prefix_hit_rate"] - baseline) < 0.02 for lv in levels[:first_preempting])
    assert levels[first_preempting]["prefix_hit_rate"] < baseline - 0.05  # the collapse begins
    assert min(lv["prefix_hit_rate"] for lv in levels) < 0.6 * baseline
    assert out["peak_concurrency"] == levels[peak]["concurrency"]
    # "Throughput peaks at sixteen ... The operating point to choose is not the peak. It is a step or
    # two below it — twelve, here"
    assert out["peak_concurrency"] == 16
    assert out["recommended_concurrency"] == 12


def test_kvledger_simulate_recommends_a_step_below_the_peak(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sim.json"
    path.write_text(json.dumps(DOC))
    assert main(["simulate", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["peak_concurrency"], out["recommended_concurrency"]) == (16, 12)
    assert out["recommendation_basis"] == "rule"
    assert "a step below the throughput peak" in out["recommendation_rule"]

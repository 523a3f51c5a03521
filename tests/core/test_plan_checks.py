"""`kvledger plan --check` and the checks list (issue 17, item 10): a CI gate for a deployment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.services.plans import run_plan

GIB = 2**30
ROWS = {"total": "80 GiB", "free_at_start": "79 GiB", "weights": "18 GiB", "non_torch": "2 GiB",
        "cuda_graphs": "1 GiB", "activation": "3 GiB"}  # fmt: skip


def doc(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": {"kv_bytes_per_token": 131072},
        "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 8192},
        "ranks": [dict(ROWS)],
    }
    for key, value in extra.items():
        base[key] = {**base[key], **value} if isinstance(base.get(key), dict) else value
    return base


def run_cli(tmp_path: Path, d: dict[str, Any], *flags: str) -> int:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(d))
    return main(["plan", str(path), "--check", *flags])


def failed(result: dict[str, Any]) -> list[str]:
    return [c["check"] for c in result["checks"] if not c["ok"]]


def test_a_plan_that_starts_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(tmp_path, doc()) == 0
    out = capsys.readouterr().out
    assert "CHECK FAILED" not in out and "checks: 2 of 2 pass" in out


def test_a_plan_that_cannot_start_exits_1_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 1 TiB manual KV budget on 80 GiB cards (issue 17, item 4's example)
    assert run_cli(tmp_path, doc(engine={"kv_cache_memory_bytes": "1 TiB"})) == 1
    out = capsys.readouterr().out
    assert "CHECK FAILED rank_starts: rank 0 will not fit --kv-cache-memory-bytes" in out


def test_json_carries_the_checks_and_the_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(tmp_path, doc(engine={"max_model_len": 10_000_000}), "--json") == 1
    result = json.loads(capsys.readouterr().out)
    assert failed(result) == ["max_model_len_fits"] and result["checks_pass"] is False
    assert "largest max_model_len that fits" in result["checks"][-1]["reason"]


def test_null_block_boundary_fails_the_gate_on_every_version() -> None:
    # one rank of exactly 512 blocks and an 8,192-token max_model_len (512 blocks): 0.28 refuses it,
    # 0.27.1 starts and that request never schedules — a gate fails both
    d = doc(ranks=[{"kv_room": 512 * 16 * 131072}], engine={"max_model_len": 8192})
    for version in ("0.27.1", "0.28.0"):
        result = run_plan({**d, "vllm_version": version}, with_levers=False, check=True)
        assert failed(result) == ["max_model_len_fits"], version


def test_operating_reserve_breach_is_named() -> None:
    # 72 GiB requested of 80 GiB with only 72.5 GiB free: 0.5 GiB left for a 1 GiB reserve
    d = doc(ranks=[dict(ROWS, free_at_start="72.5 GiB")], policy={"operating_reserve": "1 GiB"})
    result = run_plan(d, with_levers=False, check=True)
    assert failed(result) == ["operating_reserve"]
    reason = next(c["reason"] for c in result["checks"] if c["check"] == "operating_reserve")
    assert "512.0 MiB" in reason and "breached" in reason
    ok = run_plan(doc(policy={"operating_reserve": "1 GiB"}), with_levers=False, check=True)
    assert ok["checks_pass"]


def test_before_021_graphs_outside_the_budget_count_against_the_reserve() -> None:
    d = doc(ranks=[dict(ROWS, free_at_start="73.5 GiB")], policy={"operating_reserve": "1 GiB"})
    assert run_plan({**d, "vllm_version": "0.21.0"}, with_levers=False, check=True)["checks_pass"]
    old = run_plan({**d, "vllm_version": "0.10.2"}, with_levers=False, check=True)
    assert failed(old) == ["operating_reserve"]  # 73.5 − 72 − 1 GiB of graphs = 0.5 GiB


def test_growth_reserve_that_leaves_no_room_for_one_request() -> None:
    d = doc(ranks=[{"kv_room": 600 * 16 * 131072}], policy={"growth_reserve": 0.5})
    assert failed(run_plan(d, with_levers=False, check=True)) == ["growth_reserve"]


def test_without_check_the_result_is_unchanged() -> None:
    assert "checks" not in run_plan(doc(), with_levers=False)

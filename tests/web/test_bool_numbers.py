"""A JSON true/false in a number field of a plan or sizing document is refused naming the field:
pydantic's lax mode read `"gpu_memory_utilization": true` as 1.0 (a plan at utilization 1.0, exit 0)
and `"max_model_len": true` as 1. Through the CLI's entry point and the API."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .support import TestClient

PLAN = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "engine": {}, "layout": {}}


def _with(section: str, key: str, value: object) -> dict[str, object]:
    doc: dict[str, object] = json.loads(json.dumps(PLAN))
    doc[section] = {**dict(doc.get(section) or {}), key: value}  # type: ignore[call-overload]
    return doc


@pytest.mark.parametrize(("section", "key", "value"), [
    ("engine", "gpu_memory_utilization", True), ("engine", "max_model_len", True), ("layout", "tp", True),
    ("policy", "avg_live_tokens", False), ("gpu", "count", True), ("engine", "max_num_seqs", True),
])
def test_api_plan_refuses_a_boolean_number(client: TestClient, section: str, key: str, value: bool) -> None:
    resp = client.post("/api/v1/plan", json=_with(section, key, value))
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == {"field": f"{section}.{key}",
                                    "message": f"expected a number, got {str(value).lower()}"}


def test_booleans_still_read_where_the_field_is_a_flag(client: TestClient) -> None:
    doc = _with("engine", "enforce_eager", True)
    doc["layout"] = {"expert_parallel": False}
    assert client.post("/api/v1/plan", json=doc).status_code == 200


def test_api_size_refuses_a_boolean_number(client: TestClient) -> None:
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "target": {"max_model_len": True}}
    resp = client.post("/api/v1/size", json=doc)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == "target.max_model_len"


def test_cli_plan_refuses_a_boolean_utilization(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_with("engine", "gpu_memory_utilization", True)))
    proc = subprocess.run([sys.executable, "-m", "app.cli", "plan", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-500:]
    assert proc.stderr.strip() == "kvledger: error: engine.gpu_memory_utilization: expected a number, got true"


@pytest.mark.parametrize(("section", "key", "value", "shown"), [
    ("engine", "gpu_memory_utilization", float("nan"), "nan"), ("engine", "max_model_len", float("inf"), "inf"),
    ("policy", "avg_live_tokens", float("-inf"), "-inf"),
])
def test_cli_plan_refuses_nan_and_infinity(tmp_path: Path, section: str, key: str, value: float, shown: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(_with(section, key, value)))  # json writes NaN / Infinity, as users' tools do
    proc = subprocess.run([sys.executable, "-m", "app.cli", "plan", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-500:]
    assert proc.stderr.strip() == f"kvledger: error: {section}.{key}: expected a finite number, got {shown}"

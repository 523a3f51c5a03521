"""A config.json stating 10**12 layers: `kvledger kv-bytes` and `plan` never finished (the layer
walks are linear in the count) and the API's worker spun on it; now refused naming the field. Also
kv-bytes names a config field `config.X` (it said `config.config.torch_dtype`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.core.model_config import MAX_LAYERS
from app.web.app import create_app
from tests.web.support import TestClient, make_settings

CONFIG = json.loads((Path(__file__).parents[1] / "data" / "configs" / "llama31-8b.json").read_text())


def _kv_bytes(tmp_path: Path, config: dict[str, object]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return subprocess.run([sys.executable, "-m", "app.cli", "kv-bytes", str(path)], capture_output=True, text=True,
                          timeout=120)


def test_kv_bytes_refuses_an_absurd_layer_count(tmp_path: Path) -> None:
    proc = _kv_bytes(tmp_path, {**CONFIG, "num_hidden_layers": 10**12})
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("kvledger: error: config.num_hidden_layers: 1,000,000,000,000 layers is more "
                                   "than 10,000; no model vLLM serves has that many")


def test_kv_bytes_names_a_config_field_once(tmp_path: Path) -> None:
    proc = _kv_bytes(tmp_path, {**CONFIG, "torch_dtype": "float13"})
    assert proc.returncode == 2
    assert proc.stderr.startswith("kvledger: error: config.torch_dtype: unknown dtype 'float13'")


def test_the_bound_still_reads_the_largest_layer_count(tmp_path: Path) -> None:
    proc = _kv_bytes(tmp_path, {**CONFIG, "num_hidden_layers": MAX_LAYERS})
    assert proc.returncode == 0, proc.stderr
    assert f"kv_bytes_per_token: {2 * 8 * 128 * 2 * MAX_LAYERS}" in proc.stdout


def test_api_plan_refuses_an_absurd_layer_count() -> None:
    with TestClient(create_app(make_settings())) as client:
        resp = client.post("/api/v1/plan", json={"model": {"config": {**CONFIG, "num_hidden_layers": 10**12}},
                                                 "gpu": {"name": "H100 80GB"}})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == "model.config.num_hidden_layers"


def test_kv_heads_that_do_not_divide_the_heads_are_refused(tmp_path: Path) -> None:
    # 64 KV heads over 32 attention heads: 1,048,576 B/token before; vLLM's Attention asserts
    # num_heads % num_kv_heads == 0 (vllm/model_executor/layers/attention/attention.py @4dd49b06f)
    proc = _kv_bytes(tmp_path, {**CONFIG, "num_key_value_heads": 64})
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("kvledger: error: config.num_key_value_heads: 64 KV heads do not divide the 32 "
                                   "attention heads (vLLM asserts num_heads % num_kv_heads == 0)")
    assert _kv_bytes(tmp_path, {**CONFIG, "num_key_value_heads": 4}).returncode == 0


def test_a_stated_head_size_of_zero_is_refused(tmp_path: Path) -> None:
    """vLLM uses a stated head_dim as it is (get_head_size, model_arch_config_convertor.py
    @4dd49b06f); `"head_dim": 0` was silently replaced by hidden_size // heads (128 here)."""
    for key in ("head_dim", "hidden_size_per_head"):
        proc = _kv_bytes(tmp_path, {**CONFIG, key: 0})
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.strip().startswith(f"kvledger: error: config.{key}: a positive integer is required (got 0)")
    assert _kv_bytes(tmp_path, {**CONFIG, "head_dim": None}).returncode == 0  # null: not stated, as vLLM reads it

"""max_num_batched_tokens below max_num_seqs: vLLM clamps a defaulted max_num_seqs to the batched
tokens (EngineArgs._set_default_max_num_seqs_and_batched_tokens_args, vllm/engine/arg_utils.py
@4dd49b06f) and refuses a given one above them (SchedulerConfig.verify_max_model_len,
vllm/config/scheduler.py @4dd49b06f). The plan gave `--max-num-batched-tokens 512 --max-num-seqs
1024` (a command vLLM refuses) and started a plan with 256 tokens and 512 sequences."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.web.app import create_app
from tests.web.support import TestClient, make_settings

DOC = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "engine": {"max_model_len": 8192}}


def _plan(client: TestClient, **engine: int) -> dict[str, object]:
    resp = client.post("/api/v1/plan", json={**DOC, "engine": {**DOC["engine"], **engine}})  # type: ignore[dict-item]
    assert resp.status_code == 200, resp.text
    out: dict[str, object] = resp.json()
    return out


def test_a_defaulted_max_num_seqs_is_at_most_the_batched_tokens() -> None:
    with TestClient(create_app(make_settings())) as client:
        assert _plan(client)["max_num_seqs"] == 1024  # H100 default
        plan = _plan(client, max_num_batched_tokens=512)
        assert plan["max_num_seqs"] == 512
        assert "--max-num-seqs 1024" not in json.dumps(plan)


def test_given_seqs_above_the_batched_tokens_are_refused(tmp_path: Path) -> None:
    with TestClient(create_app(make_settings())) as client:
        resp = client.post("/api/v1/plan", json={**DOC, "engine": {"max_num_batched_tokens": 256, "max_num_seqs": 512}})
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"]["field"] == "engine.max_num_batched_tokens"
        assert "less than max_num_seqs (512)" in resp.json()["error"]["message"]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**DOC, "engine": {"max_num_batched_tokens": 256, "max_num_seqs": 512}}))
    proc = subprocess.run([sys.executable, "-m", "app.cli", "plan", str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("kvledger: error: engine.max_num_batched_tokens: max_num_batched_tokens (256)")

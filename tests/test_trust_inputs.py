"""Bad and odd inputs on the paths users take (the API through the app, the CLI through main()):

- an integral float in an integer field (`"tp": 2.0`) is that integer, on every plan route (the
  plan computed, then its shareable URL read the raw 2.0 as text and answered 422 on field "tp");
  2.5 is still refused, naming the field;
- booleans are strict (`"enforce_eager": "yes"` is refused naming the field, in plan and sizing
  documents), numeric strings for numbers stay lax ("0.9") — app/schemas.py states the policy;
- POST /api/v1/simulate follows the same policy (it refused "0.9" and 2.0, and took neither
  policy's view of booleans differently);
- `kvledger kv-bytes` holds its options to a plan's bounds; `kvledger serve --port` to a TCP port.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.db.session import upgrade_to_head
from app.web.app import create_app

from .web.support import TestClient, make_settings

PLAN: dict[str, Any] = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}}
CONFIG = Path(__file__).parent / "data" / "configs" / "llama31-70b.json"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    url = f"sqlite:///{tmp_path_factory.mktemp('db') / 'kvledger.sqlite3'}"
    upgrade_to_head(url)  # the simulator's rate limits live in the database
    return TestClient(create_app(make_settings(database_url=url)), raise_server_exceptions=False)


def _with(doc: dict[str, Any], section: str, key: str, value: object) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(doc))
    out[section] = {**out.get(section, {}), key: value}
    return out


@pytest.mark.parametrize(("section", "key", "whole"), [
    ("layout", "tp", 2), ("engine", "max_model_len", 4096), ("engine", "max_num_seqs", 64),
    ("engine", "max_num_batched_tokens", 4096), ("policy", "avg_live_tokens", 1000),
])
def test_an_integral_float_is_the_integer(client: TestClient, section: str, key: str, whole: int) -> None:
    as_int = client.post("/api/v1/plan", json=_with(PLAN, section, key, whole))
    as_float = client.post("/api/v1/plan", json=_with(PLAN, section, key, float(whole)))
    assert as_float.status_code == 200, as_float.text[:300]
    assert {**as_float.json(), "url": None} == {**as_int.json(), "url": None}
    page = client.get(as_float.json()["url"])  # the shareable URL opens the same plan
    assert page.status_code == 200


def test_an_integral_float_on_the_other_plan_routes(client: TestClient) -> None:
    doc = _with(PLAN, "layout", "tp", 2.0)
    export = client.post("/api/v1/export", json=doc)
    assert export.status_code == 200 and "--tensor-parallel-size 2 " in export.text, export.text[:300]
    assert client.post("/api/v1/compare", json={"a": doc, "b": PLAN}).status_code == 200
    sizing = {"model": {"catalogue": "llama-3.1-8b"}, "target": {"max_model_len": 4096.0}, "options": {"tp": [1.0]}}
    assert client.post("/api/v1/size", json=sizing).status_code == 200


def test_a_fraction_is_still_refused_naming_the_field(client: TestClient) -> None:
    resp = client.post("/api/v1/plan", json=_with(PLAN, "layout", "tp", 2.5))
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "layout.tp", resp.text[:300]
    assert "fractional" in resp.json()["error"]["message"]


@pytest.mark.parametrize(("section", "key", "value"), [
    ("engine", "enforce_eager", "yes"), ("engine", "enforce_eager", "true"), ("engine", "enforce_eager", 1),
    ("engine", "enable_prefix_caching", "off"), ("layout", "expert_parallel", "on"),
    ("engine", "async_scheduling", 0.0), ("engine", "disable_hybrid_kv_cache_manager", [True]),
])
def test_booleans_are_strict_in_a_plan(client: TestClient, section: str, key: str, value: object) -> None:
    resp = client.post("/api/v1/plan", json=_with(PLAN, section, key, value))
    assert resp.status_code == 422, resp.text[:300]
    assert resp.json()["error"]["field"] == f"{section}.{key}"
    assert resp.json()["error"]["message"].startswith("expected true or false, got ")


def test_booleans_are_strict_in_a_sizing_document(client: TestClient) -> None:
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "target": {"max_model_len": 4096},
           "engine": {"enforce_eager": "yes"}}
    resp = client.post("/api/v1/size", json=doc)
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "engine.enforce_eager", resp.text[:300]
    doc["engine"] = {"enforce_eager": True}
    assert client.post("/api/v1/size", json=doc).status_code == 200


def test_numeric_strings_stay_lax_but_not_nan(client: TestClient) -> None:
    lax = client.post("/api/v1/plan", json=_with(PLAN, "engine", "gpu_memory_utilization", "0.9"))
    assert lax.status_code == 200 and lax.json()["engine"]["gpu_memory_utilization"] == 0.9, lax.text[:300]
    for text in ("nan", "inf", "-Infinity"):
        resp = client.post("/api/v1/plan", json=_with(PLAN, "engine", "gpu_memory_utilization", text))
        assert resp.status_code == 422, (text, resp.text[:300])
        assert resp.json()["error"] == {"field": "engine.gpu_memory_utilization",
                                        "message": f"expected a finite number, got {text!r}"}


SIM: dict[str, Any] = {"pool": {"blocks": 2000, "block_size": 16}, "ramp": [1, 2],
                       "workload": {"requests_per_level": 20}, "seed": 2}


def test_simulate_follows_the_plans_number_policy(client: TestClient) -> None:
    base = client.post("/api/v1/simulate", json=SIM)
    assert base.status_code == 200, base.text[:300]
    lax = json.loads(json.dumps(SIM))
    lax["pool"]["blocks"] = "2000"
    lax["ramp"] = [1.0, "2"]
    lax["workload"]["requests_per_level"] = 20.0
    same = client.post("/api/v1/simulate", json=lax)
    assert same.status_code == 200, same.text[:300]
    assert same.json() == base.json()
    shared = client.post("/api/v1/simulate", json={**SIM, "workload": {**SIM["workload"], "shared_fraction": "0.5"}})
    assert shared.status_code == 200 and shared.json()["input"]["workload"]["shared_fraction"] == 0.5


@pytest.mark.parametrize(("path", "value", "message"), [
    ("ramp", [1, 2.5], "must be an integer, got 2.5"), ("ramp", [True], "must be an integer, not a boolean"),
    ("scheduler", {"enable_prefix_caching": "yes"}, "must be true or false, not a string"),
    ("scheduler", {"enable_prefix_caching": 1}, "must be true or false, not int"),
    ("seed", "nan", "must be an integer, got nan"),
])
def test_simulate_refuses_what_a_plan_refuses(client: TestClient, path: str, value: object, message: str) -> None:
    resp = client.post("/api/v1/simulate", json={**SIM, path: value})
    assert resp.status_code == 422, resp.text[:300]
    assert resp.json()["error"]["field"].startswith(path) and resp.json()["error"]["message"] == message


@pytest.mark.parametrize(("flag", "field"), [
    ("--max-model-len", "engine.max_model_len"), ("--max-num-batched-tokens", "engine.max_num_batched_tokens"),
    ("--tp", "layout.tp"), ("--block-size", "engine.block_size"), ("--dcp", "layout.dcp"),
])
def test_kv_bytes_holds_its_options_to_a_plans_bounds(
    flag: str, field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = str(10**20)
    assert main(["kv-bytes", str(CONFIG), flag, huge]) == 2
    err = capsys.readouterr().err.strip()
    # named by the option as written, with the value given and what it is read as
    assert err.startswith(f"kvledger: error: {flag} {huge} is out of range: give a whole number from 1 to "), err
    assert err.endswith(f"(read as {field})"), err
    assert "Traceback" not in err


def test_kv_bytes_at_the_bound_still_answers(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """At the option's own bound on a config whose length reaches it, and on the real config with
    --allow-long-max-model-len (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1); without it the model's derived maximum
    (131,072) is the bound, named by the option as written."""
    long_config = {**json.loads(CONFIG.read_text()), "max_position_embeddings": 100_000_000}
    (tmp_path / "config.json").write_text(json.dumps(long_config))
    assert main(["kv-bytes", str(tmp_path / "config.json"), "--max-model-len", "100000000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_model_len"] == 100_000_000
    argv = ["kv-bytes", str(CONFIG), "--max-model-len", "100000000", "--allow-long-max-model-len", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["max_model_len"] == 100_000_000
    assert main(["kv-bytes", str(CONFIG), "--max-model-len", "131073"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kvledger: error: --max-model-len: 131,073 is more than the model's derived maximum length "
                          "131,072"), err
    assert err.strip().endswith("(read as engine.max_model_len)"), err


@pytest.mark.parametrize("port", ["-5", "70000", "0", "eighty"])
def test_serve_refuses_a_port_that_is_not_one(port: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "app.cli", "serve", "--port", port],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr[-500:]
    assert "argument --port: must be a TCP port from 1 to 65535" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_import_refuses_a_model_name_of_a_megabyte_at_once(client: TestClient) -> None:
    """Found by tests/web/test_body_abuse_every_route.py's 1 MB body: a log beside a 1 MB model name
    spent the import's 30 s of processor time in the catalogue lookup (then 'stopped')."""
    log = (Path(__file__).parent / "data" / "vllm-logs" / "29-v0190-llama31-8b-h100-tp1-mml16k.log").read_text()
    resp = client.post("/api/v1/import/log", json={"text": log, "model": "y" * 2**20})
    assert resp.status_code == 422, resp.text[:300]
    assert resp.json()["error"] == {"field": "model", "message": "no catalogue model is named with more than 300 "
                                                                 "characters (got 1,048,576)"}
    unknown = client.post("/api/v1/import/log", json={"text": log, "model": "n" * 300})
    assert unknown.status_code == 422 and len(unknown.text) < 1000, unknown.text[:300]  # the name is not echoed whole

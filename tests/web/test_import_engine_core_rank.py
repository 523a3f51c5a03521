"""A TP1 V1 log's worker rows are printed under the EngineCore process prefix (`(EngineCore pid=243)`,
`(EngineCore_DP0 pid=10479)`): vLLM runs the only worker of a world-size-1 engine in that process
(the "uni" executor, vllm/config/parallel.py; UniProcExecutor at rank 0, vllm/v1/executor/
uniproc_executor.py @28be48fa9). Before, the import labelled the rank "EngineCore" / "EngineCore_DP0"
(the process name) on the import page, in the plan's rank table and in `kvledger import-log`; now it
is TP0, with how that is known, and the process stays its evidence. An excerpt that states no
parallel sizes (16: three KV lines) keeps its process label: no index is made up."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from .support import TestClient

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
SAME = {"Sec-Fetch-Site": "same-origin"}


@pytest.mark.parametrize(("name", "process", "basis"), [
    ("29-v0190-llama31-8b-h100-tp1-mml16k.log", "EngineCore", "tensor_parallel_size=1 and pipeline_parallel_size=1"),
    ("40-v0151-llama31-8b-a100-40gb-tp1-eager-offline.log", "EngineCore_DP0",
     "stated: 'rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0"),
])  # fmt: skip
def test_api_and_plan_label_the_engine_cores_worker_tp0(
    client: TestClient, name: str, process: str, basis: str
) -> None:
    reply = client.post("/api/v1/import/log", json={"text": (LOGS / name).read_text(), "model": "llama-3.1-8b"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    (rank,) = body["runs"][0]["ranks"]
    assert (rank["rank"], rank["process"]) == ("TP0", process) and basis in rank["index_basis"]
    plan = client.get(body["plans"][0]["url"].replace("/plan?", "/plan.json?", 1)).json()
    assert [r["label"] for r in plan["ranks"]] == ["TP0"]


def test_import_page_and_cli_show_tp0(client: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    log = LOGS / "29-v0190-llama31-8b-h100-tp1-mml16k.log"
    page = html.unescape(client.post("/import", data={"text": log.read_text(), "model": "llama-3.1-8b"},
                                     headers=SAME).text)  # fmt: skip
    assert ">TP0<" in page and ">EngineCore<" not in page
    assert main(["import-log", str(log)]) == 0
    assert "    TP0  total 79.19 GiB" in capsys.readouterr().out
    excerpt = LOGS / "16-v0102-qwen3-14b-lmcache-tp1.log"  # states no tensor_parallel_size
    assert main(["import-log", str(excerpt)]) == 0
    assert "EngineCore_DP0  " in capsys.readouterr().out

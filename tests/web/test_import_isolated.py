"""Log import through the web (issue 12 item 1): big logs are read in a child process, under the
server's per-request time limit with a clear message; the cost is linear in the runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.services import imports
from app.web.app import create_app

from .support import TestClient, make_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_parser import typical_log


def test_a_big_log_is_read_in_a_child_and_gets_plan_links() -> None:
    text = typical_log(3000)  # ~0.4 MB: above the inline threshold
    assert len(text) > 256 * 1024
    with TestClient(create_app(make_settings())) as client:
        reply = client.post("/api/v1/import/log", data={"text": text})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert len(body["runs"]) == len(body["plans"]) > 5
        first = next(p for p in body["plans"] if p["url"])
        assert client.get(first["url"]).status_code == 200


@pytest.mark.parametrize("path", ["/api/v1/import/log", "/import.json", "/import"])
def test_past_the_time_limit_the_reply_names_the_field_and_the_limit(path: str) -> None:
    text = typical_log(20000)  # ~2.8 MB: seconds of parsing, far past 0.05 s
    with TestClient(create_app(make_settings(import_time_limit_s=0.05))) as client:
        reply = client.post(path, data={"text": text})
    assert reply.status_code == 422
    if path == "/import":
        assert "more than the 0.05 s of processor time" in reply.text
    else:
        assert reply.json()["error"]["field"] == "log"
        assert "more than the 0.05 s of processor time" in reply.json()["error"]["message"]


def test_plan_documents_cost_one_run_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root of the quadratic import: each run's plan converts that run only. Counted in
    values converted (not time): doubling the runs doubles the work, it does not quadruple it."""
    converted = 0
    original = imports._plain

    def counting(obj: object) -> object:
        nonlocal converted
        converted += 1
        return original(obj)

    monkeypatch.setattr(imports, "_plain", counting)

    def work(lines: int) -> tuple[int, int]:
        nonlocal converted
        imports.read_log(typical_log(lines))  # warm the catalogue's caches
        converted = 0
        _parsed, docs = imports.read_log(typical_log(lines))
        return converted, len(docs)

    small, runs_small = work(1500)
    large, runs_large = work(3000)
    assert runs_large >= 1.8 * runs_small
    assert large / small < 1.3 * runs_large / runs_small  # linear, with slack for run sizes


def test_an_import_with_more_plans_than_the_allowance_links_the_first_and_says_why_not_the_rest() -> None:
    from dataclasses import replace

    from bench_parser import real_logs

    text = real_logs(1)  # the 59 real logs once: 40 runs, 11 distinct plan documents (~11 KB)
    app = create_app(make_settings())
    app.state.bases.limits = replace(app.state.bases.limits, client_bytes=4000)  # a few of them fit
    with TestClient(app) as client:
        reply = client.post("/api/v1/import/log", data={"text": text})
        assert reply.status_code == 200, reply.text[:300]
        links = reply.json()["plans"]
        linked = [p for p in links if p["url"]]
        refused = [p for p in links if p["error"] and "more runs' plans than the server keeps" in p["error"]]
        assert linked and refused
        for plan in linked:  # every link handed out opens: none was evicted by a later run of the import
            assert client.get(plan["url"]).status_code == 200, plan

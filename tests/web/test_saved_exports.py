"""A saved plan's page links every deploy export, each taken from the *saved* result (issue 16 §4):
`/p/{slug}/export/{format}` on SQLite and PostgreSQL, bad formats and broken rows as clear 4xx."""

from __future__ import annotations

import copy
import datetime as dt
import re
from types import SimpleNamespace
from typing import Any

import yaml
from sqlalchemy import create_engine, insert

from app.core import exports
from app.db.models import SavedPlan
from app.db.records import plan_hash
from app.ingest.vllm_serve import read_serve
from app.services import plans

from .saved_support import PLAN_DOC, app, backend, client, database_url, settings
from .support import TestClient

__all__ = ["app", "backend", "client", "database_url", "settings"]  # fixtures


def _insert(url: str, slug: str, document: Any, summary: Any) -> None:
    """A row written around the validator, with a valid content hash (as an older KV Ledger would
    have stored it; a row whose hash does not match is refused, tests/web/test_tamper_web.py)."""
    values = {"slug": slug, "parent_id": None, "title": "written around KV Ledger", "document": document,
              "summary": summary, "core_version": "0.0.1", "created_at": dt.datetime.now(dt.UTC), "listed": False}
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(insert(SavedPlan).values(**values, content_hash=plan_hash(SimpleNamespace(**values), None)))
    engine.dispose()


def _links(text: str, slug: str) -> list[str]:
    return re.findall(rf'href="(/p/{re.escape(slug)}/export/[^"]+)"', text)


def test_saved_page_links_every_format_from_the_saved_result(client: TestClient) -> None:
    saved = client.post("/api/v1/plans", json=PLAN_DOC).json()
    slug = saved["slug"]
    page = client.get(f"/p/{slug}").text
    links = _links(page, slug)
    assert [u.rsplit("/", 1)[1] for u in links] == list(exports.FORMATS)
    assert "/plan/export/" not in page  # never today's recomputation of the what-if
    copy_blocks = re.findall(r'<details data-export-url="([^"]+)"', page)
    assert copy_blocks == [f"/p/{slug}/export/{fmt}" for fmt in ("vllm-config", "kserve", "production-stack", "llm-d")]
    expected = plans.run_plan(PLAN_DOC)  # an independent computation of the same plan
    for url in links:
        fmt = url.rsplit("/", 1)[1]
        response = client.get(url)
        assert response.status_code == 200, (url, response.text[:300])
        assert "attachment" in response.headers["content-disposition"]
        assert response.text == exports.export(expected, fmt).text, fmt
        if fmt in ("vllm-config", "kserve", "production-stack", "llm-d"):
            assert isinstance(yaml.safe_load(response.text), dict), fmt
    assert read_serve(client.get(f"/p/{slug}/export/serve").text).document()["layout"] == {"tp": 4}


def test_exports_are_the_stored_result_not_a_recomputation(client: TestClient, database_url: str) -> None:
    summary = copy.deepcopy(plans.run_plan(PLAN_DOC))
    for arg in summary["vllm_args"]:
        if arg["flag"] == "--max-model-len":
            arg["value"] = 4321  # what the stored row says, whatever today's core would compute
    _insert(database_url, "stored-args", PLAN_DOC, summary)
    served = client.get("/p/stored-args/export/serve")
    assert served.status_code == 200 and "--max-model-len 4321" in served.text
    assert "4321" in client.get("/p/stored-args/export/vllm-config").text


def test_bad_formats_unknown_plans_and_writes(client: TestClient) -> None:
    slug = client.post("/api/v1/plans", json=PLAN_DOC).json()["slug"]
    bad = client.get(f"/p/{slug}/export/docx")
    assert bad.status_code == 422 and "expected one of serve, vllm-config" in bad.text  # the error page
    assert client.get("/p/no-such-plan/export/serve").status_code == 404
    assert client.post(f"/p/{slug}/export/serve").status_code == 405


def test_a_plan_without_a_model_links_only_the_csv(client: TestClient) -> None:
    rank = {"total": "80 GiB", "free_at_start": "79.3 GiB", "weights": "18 GiB", "non_torch": "4 GiB",
            "cuda_graphs": "3 GiB", "activation": "3 GiB"}
    doc = {"model": {"kv_bytes_per_token": 131072}, "engine": {"max_model_len": 12000},
           "ranks": [{"label": "0", **rank}]}
    slug = client.post("/api/v1/plans", json=doc).json()["slug"]
    assert [u.rsplit("/", 1)[1] for u in _links(client.get(f"/p/{slug}").text, slug)] == ["csv"]
    assert client.get(f"/p/{slug}/export/csv").text.startswith("rank,total_bytes")
    refused = client.get(f"/p/{slug}/export/kserve")
    assert refused.status_code == 422 and "needs the model to serve" in refused.text


def test_a_row_written_around_kv_ledger_is_a_clear_error(client: TestClient, database_url: str) -> None:
    _insert(database_url, "broken-row", PLAN_DOC, [1, 2])
    for fmt in exports.FORMATS:
        response = client.get(f"/p/broken-row/export/{fmt}")
        assert response.status_code == 422, (fmt, response.text[:300])
        assert "cannot be exported" in response.text

"""Unsaved base documents over HTTP (issue 12 item 3), on SQLite and PostgreSQL: a flood of
imports from one address is bounded by its allowance and never pushes out another client's
what-if; one document over the allowance is a clear 422."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import FastAPI
from sqlalchemy import func, select

from app.db.models import BaseDocument
from app.db.session import open_database
from app.settings import Settings
from app.web.app import create_app

from .saved_support import backend, database_url, settings
from .support import TestClient

__all__ = ["backend", "database_url", "settings"]  # fixtures

CONFIG: dict[str, Any] = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                          "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
                          "max_position_embeddings": 8192, "vocab_size": 128256, "intermediate_size": 14336,
                          "torch_dtype": "bfloat16"}


def _doc(n: int, pad: int = 30_000) -> dict[str, Any]:
    """A plan document that only a base document can carry (~pad bytes of config), distinct per n."""
    return {"model": {"config": {**CONFIG, "_padding": f"{n:06d}" + "x" * pad}}, "gpu": {"total": "80 GiB"}}


def _base_url(client: TestClient, doc: dict[str, Any]) -> str:
    response = client.post("/api/v1/plan", json=doc)
    assert response.status_code == 200, response.text[:300]
    url: str = response.json()["url"]
    assert url.startswith("/plan?base="), url
    return url


def _stored(settings: Settings) -> tuple[int, int]:
    db = open_database(settings)
    with db.read() as session:
        count, size = session.execute(select(func.count(), func.coalesce(func.sum(BaseDocument.size_bytes), 0))
                                      .select_from(BaseDocument)).one()
    db.dispose()
    return int(count), int(size)


def _fresh(settings: Settings) -> FastAPI:
    """Another server on the same database: nothing in its memory cache."""
    return create_app(settings)


def test_a_flood_is_bounded_and_never_pushes_out_another_clients(settings: Settings) -> None:
    capped = replace(settings, base_client_bytes=100_000)
    app = create_app(capped)
    with TestClient(app) as flooder:
        theirs = _base_url(TestClient(app, client=("10.0.0.7", 50000)), _doc(0))
        mine = [_base_url(flooder, _doc(n)) for n in range(1, 11)]
    count, size = _stored(capped)
    assert count == 4 and size <= 100_000 + 31_000  # the flooder's 3 newest and the other client's one
    with TestClient(_fresh(capped)) as other:
        assert other.get(theirs).status_code == 200  # still there for its owner, from the database
        assert other.get(mine[-1]).status_code == 200
        gone = other.get(mine[0])
        assert gone.status_code in (404, 422) and "went wrong" not in gone.text


def test_one_document_over_the_allowance_is_a_clear_422(settings: Settings) -> None:
    capped = replace(settings, base_client_bytes=64 * 1024)
    with TestClient(create_app(capped)) as client:
        response = client.post("/api/v1/plan", json=_doc(1, pad=100_000))
        assert response.status_code == 422
        assert "at most 0.1 MiB of unsaved documents per client" in response.json()["error"]["message"]
    assert _stored(capped) == (0, 0)


def test_an_imports_plans_are_stored_in_one_write_and_none_evicts_another(settings: Settings) -> None:
    """A log import stores every run's plan at once (`put_many`): as many as fit one client's
    allowance together get a link that opens from the database; the rest are told why, and no
    stored link of the same import is dead on arrival (stored one by one, later ones evicted the
    first ones); another client's what-if stays."""
    from app.services.clients import CLIENT

    capped = replace(settings, base_client_bytes=100_000)
    app = create_app(capped)
    docs = [_doc(n) for n in range(1, 8)] + [_doc(1)]  # the last repeats the first: the same id
    with TestClient(app, client=("10.0.0.7", 50000)) as other:  # the app's lifespan closes its database
        theirs = _base_url(other, _doc(0))
        token = CLIENT.set("10.0.0.9")
        try:
            ids = app.state.bases.put_many(docs)
        finally:
            CLIENT.reset(token)
    stored = [i for i in ids if i is not None]
    assert 2 <= len(set(stored)) <= 3 and ids[-1] == ids[0] and ids.count(None) == len(ids) - len(stored)
    assert ids[:len(set(stored))] == list(dict.fromkeys(stored))  # the first ones, in order
    count, size = _stored(capped)
    assert count == len(set(stored)) + 1 and size <= 100_000 + 31_000
    with TestClient(_fresh(capped)) as fresh:  # nothing in memory: from the database
        for base_id in set(stored):
            assert fresh.get(f"/plan?base={base_id}").status_code == 200
        assert fresh.get(theirs).status_code == 200

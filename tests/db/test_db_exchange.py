"""A deployment exports to one JSON document and imports back losslessly."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import pytest

from app.core.audit import LedgerRow
from app.db import exchange
from app.db import repository as repo
from app.db.repository import Conflict, InvalidInput
from app.db.session import make_engine, make_sessionmaker

from .conftest import MakeDb
from .factories import ledger_in, rank_rows


def _export_of_sample(url: str) -> dict[str, Any]:
    engine = make_engine(url)
    factory = make_sessionmaker(engine, write=True)
    with factory.begin() as s:
        repo.create_deployment(s, "prod-a", "Prod <A> & co", "Qwen/Qwen3-32B", "TP8\nPP1", "8× H100")
        repo.add_ledger(s, "prod-a", ledger_in(note="first"))
        repo.add_ledger(
            s,
            "prod-a",
            ledger_in(
                note="ünïcödé\nmulti-line <b>note</b>",
                log="HEAD\n" + "x ✓\n" * 5000 + "TAIL\n",
                evidence={"vllm_version": "0.20.1", "gpu_memory_utilization": 0.92, "ep": 2},
                ranks=rank_rows(4, kv_gib=40, shift=1),
            ),
            max_source_log_bytes=2048,
        )
        repo.add_ledger(
            s,
            "prod-a",
            ledger_in(note="", log=None, captured_at=None, evidence={}, ranks=[LedgerRow("dp0-tp0")]),
        )
    with factory() as s:
        data = exchange.export_deployment(s, "prod-a")
    engine.dispose()
    return data


def test_export_import_round_trip_into_a_fresh_database(make_db: MakeDb) -> None:
    source, target = make_db(), make_db()
    exported = _export_of_sample(source)
    assert json.loads(json.dumps(exported)) == exported  # JSON-able as is
    assert len(exported["ledgers"]) == 3
    assert exported["ledgers"][1]["source_log"]["truncated"] is True

    engine = make_engine(target)
    factory = make_sessionmaker(engine, write=True)
    with factory.begin() as s:
        exchange.import_deployment(s, json.loads(json.dumps(exported)))
    with factory() as s:
        assert exchange.export_deployment(s, "prod-a") == exported
    # A second import under another slug works; the same slug is a conflict.
    with factory.begin() as s:
        exchange.import_deployment(s, exported, slug="prod-a-copy")
    with factory() as s:
        again = exchange.export_deployment(s, "prod-a-copy")
    assert again == {**exported, "deployment": {**exported["deployment"], "slug": "prod-a-copy"}}
    with pytest.raises(Conflict, match="'prod-a' already exists"), factory.begin() as s:
        exchange.import_deployment(s, exported)
    engine.dispose()


def _broken(exported: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(exported)
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["format"], "zip", "not a kvledger.deployment file"),
        (["version"], 7, "unsupported kvledger.deployment version 7"),
        (["ledgers", 0, "ranks", 0, "kv_bytes"], "lots", "rank 0 kv_bytes must be a whole number"),
        (["ledgers", 0, "ranks", 0, "bogus_bytes"], 1, "ledgers[0].ranks[0] has unknown rows: bogus_bytes"),
        (["ledgers", 0, "evidence", "nope"], 1, "unknown evidence key 'nope'"),
        (["ledgers", 0, "evidence"], [1], "evidence must be an object"),
        (["ledgers", 1, "created_at"], "yesterday", "ledgers[1].created_at 'yesterday' is not an ISO"),
        (["ledgers", 0, "captured_at"], "2026-13-01", "ledgers[0].captured_at '2026-13-01' is not an ISO"),
        (["ledgers", 0, "note"], KeyError, "ledgers[0] is missing 'note'"),
        (["deployment", "slug"], "Not A Slug", "deployment slug 'Not A Slug'"),
    ],
)
def test_import_rejects_broken_files_clearly(make_db: MakeDb, path: list[Any], value: Any, message: str) -> None:
    url = make_db()
    exported = _export_of_sample(url)
    engine = make_engine(url)
    with pytest.raises(InvalidInput) as info, make_sessionmaker(engine, write=True).begin() as s:
        exchange.import_deployment(s, _broken(exported, path, value), slug=None if path[0] == "deployment" else "new")
    assert message in str(info.value)
    with make_sessionmaker(engine)() as s:
        assert [d.slug for d in repo.list_deployments(s)] == ["prod-a"]  # nothing half-imported
    engine.dispose()


def test_export_keeps_times_in_utc(make_db: MakeDb) -> None:
    url = make_db()
    exported = _export_of_sample(url)
    for stamp in [exported["deployment"]["created_at"], *(x["created_at"] for x in exported["ledgers"])]:
        assert dt.datetime.fromisoformat(stamp).utcoffset() == dt.timedelta(0)

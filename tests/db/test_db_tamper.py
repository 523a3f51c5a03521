"""Tamper evidence on both databases (issue 12 item 5): every plan and ledger carries a content
hash every read verifies; DELETE, SQLite's INSERT OR REPLACE and PostgreSQL's TRUNCATE and
ON CONFLICT DO UPDATE are refused by triggers; the data migration hashes existing rows."""

from __future__ import annotations

import hashlib
import json

import pytest
from alembic import command
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.db import records
from app.db import repository as repo
from app.db.session import alembic_config, make_engine, make_sessionmaker

from .factories import PLAN_DOCUMENT, PLAN_SUMMARY, ledger_in

Factory = sessionmaker[Session]


def _stored(factory: Factory) -> tuple[int, str]:
    with factory.begin() as s:
        repo.create_deployment(s, "prod-a", "Prod A", "Qwen/Qwen3-32B")
        ledger_id = repo.add_ledger(s, "prod-a", ledger_in())
        slug = repo.save_plan(s, PLAN_DOCUMENT, PLAN_SUMMARY, "0.1.0", "original", listed=True)
    return ledger_id, slug


def _drop_update_guard(engine: Engine, table: str) -> None:
    """What someone with write access to the database file or server can do."""
    with engine.begin() as conn:
        on = f" ON {table}" if engine.dialect.name == "postgresql" else ""
        conn.execute(text(f"DROP TRIGGER {table}_append_only{on}"))


def test_saved_records_verify_intact(write_factory: Factory) -> None:
    ledger_id, slug = _stored(write_factory)
    with write_factory.begin() as s:
        child = repo.save_plan(s, {"v": 2}, {"r": 2}, "0.1.0", "child", parent_slug=slug)
    with write_factory() as s:
        plan = repo.get_plan(s, slug)
        assert plan.intact and plan.listed
        assert all(p.intact for p in repo.list_listed_plans(s))
        assert all(p.intact for p in repo.plan_versions(s, child)) and repo.get_plan(s, child).intact
        assert [p.intact for p in repo.plan_children(s, slug)] == [True]
        ledger = repo.get_ledger(s, ledger_id)
        assert ledger.intact and ledger.slug and not ledger.slug.isdigit() and len(ledger.slug) >= 22
        assert repo.get_ledger(s, ledger_id, with_source_log=False).intact
        assert [x.intact for x in repo.list_ledgers(s, "prod-a")] == [True]
        assert repo.ledger_id_for_slug(s, ledger.slug) == ledger_id
        with pytest.raises(repo.NotFound):
            repo.ledger_id_for_slug(s, str(ledger_id))


def test_the_hash_is_sha256_of_canonical_json() -> None:
    """An independent computation of the canonical form: sorted keys, no spaces, UTF-8."""
    value = {"b": [1, 2.5, None], "a": "ü"}
    expected = '{"a":"ü","b":[1,2.5,null]}'.encode()
    assert records.canonical_json(value) == expected
    assert records.sha256_text("x") == hashlib.sha256(b"x").hexdigest()
    with pytest.raises(ValueError):
        records.canonical_json({"x": float("nan")})
    assert json.loads(records.canonical_json(PLAN_DOCUMENT)) == PLAN_DOCUMENT


@pytest.mark.parametrize(
    ("table", "statement"),
    [
        ("saved_plan", "UPDATE saved_plan SET title = 'hacked'"),
        ("saved_plan", "UPDATE saved_plan SET summary = document"),
        ("saved_plan", "UPDATE saved_plan SET listed = false"),
        ("ledger", "UPDATE ledger SET note = 'hacked'"),
        ("ledger_rank", "UPDATE ledger_rank SET kv_bytes = 1"),
        ("ledger", "UPDATE ledger SET source_log = 'INFO forged\n'"),
    ],
)
def test_a_row_changed_around_the_guard_reads_as_changed(
    write_factory: Factory, engine: Engine, table: str, statement: str
) -> None:
    ledger_id, slug = _stored(write_factory)
    _drop_update_guard(engine, table)
    with engine.begin() as conn:
        conn.execute(text(statement))
    with write_factory() as s:
        plan_ok = repo.get_plan(s, slug).intact
        ledger_ok = repo.get_ledger(s, ledger_id).intact
        listed = repo.list_listed_plans(s)
        history_ok = repo.list_ledgers(s, "prod-a")[0].intact
    assert plan_ok is (table != "saved_plan")
    assert ledger_ok is (table == "saved_plan")
    if table == "saved_plan" and "listed" not in statement:
        assert [p.intact for p in listed] == [False]
    # The history list verifies everything but the log text, which it does not read; the full read does.
    assert history_ok is (table == "saved_plan" or "source_log" in statement)


@pytest.mark.parametrize("table", ["saved_plan", "ledger", "ledger_rank"])
def test_delete_is_refused(write_factory: Factory, engine: Engine, table: str) -> None:
    _stored(write_factory)
    with pytest.raises(DBAPIError, match="immutable: DELETE refused"), engine.begin() as conn:
        conn.execute(text(f"DELETE FROM {table}"))
    if engine.dialect.name == "postgresql":
        with pytest.raises(DBAPIError, match="immutable: TRUNCATE refused"), engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {table} CASCADE"))
    with write_factory() as s:
        assert len(repo.list_ledgers(s, "prod-a")[0].ranks) == 8
        assert len(repo.list_listed_plans(s)) == 1


def test_replace_is_refused(write_factory: Factory, engine: Engine) -> None:
    """The hole the issue found: SQLite's INSERT OR REPLACE rewrote a saved plan in place. On
    PostgreSQL the equivalent upsert is an UPDATE, refused by migration 0003's trigger."""
    ledger_id, slug = _stored(write_factory)
    if engine.dialect.name == "sqlite":
        statements = {
            "REPLACE refused": (
                "INSERT OR REPLACE INTO saved_plan (id, slug, title, document, summary, core_version, created_at, "
                "listed) SELECT id, slug, 'forged', document, summary, core_version, created_at, listed FROM saved_plan"
            ),
            "ledger rows are immutable: REPLACE": (
                "INSERT OR REPLACE INTO ledger (id, slug, deployment_id, created_at, note, source_log_truncated) "
                "SELECT id, slug, deployment_id, created_at, 'forged', 0 FROM ledger"
            ),
            "ledger_rank rows are immutable: REPLACE": (
                "INSERT OR REPLACE INTO ledger_rank (ledger_id, rank, ordinal, kv_bytes) "
                "SELECT ledger_id, rank, ordinal, 1 FROM ledger_rank"
            ),
        }
    else:
        statements = {
            "immutable: UPDATE refused": (
                "INSERT INTO saved_plan (slug, title, document, summary, core_version, created_at, listed) "
                "SELECT slug, 'forged', document, summary, core_version, created_at, listed FROM saved_plan "
                "ON CONFLICT (slug) DO UPDATE SET title = EXCLUDED.title"
            ),
        }
    for message, statement in statements.items():
        with pytest.raises(DBAPIError, match=message), engine.begin() as conn:
            conn.execute(text(statement))
    with write_factory() as s:
        plan = repo.get_plan(s, slug)
        assert (plan.title, plan.intact) == ("original", True)
        ledger = repo.get_ledger(s, ledger_id)
        assert ledger.intact and ledger.note == "boot"
        assert ledger.ranks[0].kv_bytes != 1


def test_the_data_migration_hashes_existing_rows(db_url: str) -> None:
    """Rows stored before migration 0005 get an address and a hash, stay unlisted, read intact."""
    url = db_url
    config = alembic_config(url)
    command.downgrade(config, "0004")  # an empty database at head: back to 0004, stored as 0004 did
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO deployment (slug, name, model, layout, hardware, created_at) "
                          "VALUES ('old', 'Old', 'm', '', '', '2026-11-01 10:00:00')"))
        conn.execute(text(
            "INSERT INTO ledger (deployment_id, created_at, captured_at, note, tp, gpu_memory_utilization, "
            "source_log, source_log_bytes, source_log_truncated) SELECT id, '2026-11-02 10:00:00.123456', "
            "'2026-11-02', 'boot', 8, 0.9, 'INFO ü\n', 8, false FROM deployment"))
        conn.execute(text("INSERT INTO ledger_rank (ledger_id, rank, ordinal, kv_bytes, num_gpu_blocks) "
                          "SELECT id, '0', 0, 123456789, 1000 FROM ledger"))
        conn.execute(text(
            "INSERT INTO saved_plan (slug, title, document, summary, core_version, created_at) VALUES "
            "('p1', 'Old plan', '{\"b\": 1.5, \"a\": [1, null]}', '{\"tokens\": 12}', '0.0.9', "
            "'2026-11-03 10:00:00')"))
        conn.execute(text(
            "INSERT INTO saved_plan (slug, parent_id, title, document, summary, core_version, created_at) "
            "SELECT 'p2', id, 'Child', '{}', '{}', '0.0.9', '2026-11-04 10:00:00' FROM saved_plan"))
        ledger_id = conn.execute(text("SELECT id FROM ledger")).scalar_one()
    engine.dispose()
    command.upgrade(config, "head")
    engine = make_engine(url)
    factory = make_sessionmaker(engine, write=True)
    with factory() as s:
        ledger = repo.get_ledger(s, ledger_id)
        assert ledger.intact and ledger.slug and ledger.source_log == "INFO ü\n"
        assert [p.slug for p in repo.plan_versions(s, "p2")] == ["p1", "p2"]
        assert all(p.intact and not p.listed for p in repo.plan_versions(s, "p2"))
        assert repo.list_listed_plans(s) == []
    engine.dispose()

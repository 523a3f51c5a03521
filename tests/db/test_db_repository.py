"""Repository functions on both databases: deployments, ledgers, saved plans, immutability."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.core.audit import LedgerRow, diff_ledgers
from app.db import repository as repo
from app.db.models import SavedPlan
from app.db.repository import Conflict, InvalidInput, LedgerIn, NotFound

from .factories import EVIDENCE, PLAN_DOCUMENT, PLAN_SUMMARY, ledger_in, rank_rows

Factory = sessionmaker[Session]


def _deployment(factory: Factory, slug: str = "prod-a") -> None:
    with factory.begin() as s:
        repo.create_deployment(s, slug, "Prod A", "Qwen/Qwen3-32B", "TP8 PP1", "8× H100 80GB")


def test_deployments_create_get_list_and_errors(write_factory: Factory) -> None:
    _deployment(write_factory, "prod-b")
    _deployment(write_factory, "prod-a")
    with write_factory() as s:
        got = repo.get_deployment(s, "prod-a")
        assert (got.slug, got.name, got.model, got.layout, got.hardware) == (
            "prod-a",
            "Prod A",
            "Qwen/Qwen3-32B",
            "TP8 PP1",
            "8× H100 80GB",
        )
        assert got.created_at.tzinfo is not None
        assert [d.slug for d in repo.list_deployments(s)] == ["prod-a", "prod-b"]
        with pytest.raises(NotFound, match="no deployment with slug 'nope'"):
            repo.get_deployment(s, "nope")
    with pytest.raises(Conflict, match="'prod-a' already exists"), write_factory.begin() as s:
        repo.create_deployment(s, "prod-a", "again", "m")
    with pytest.raises(InvalidInput, match="deployment slug 'Bad Slug!'"), write_factory.begin() as s:
        repo.create_deployment(s, "Bad Slug!", "x", "m")


def test_ledger_round_trip_with_ranks_and_evidence(write_factory: Factory) -> None:
    _deployment(write_factory)
    with write_factory.begin() as s:
        ledger_id = repo.add_ledger(s, "prod-a", ledger_in(note="after upgrade"))
    with write_factory() as s:
        got = repo.get_ledger(s, ledger_id)
    assert got.deployment_slug == "prod-a"
    assert got.note == "after upgrade"
    assert got.captured_at == dt.date(2026, 11, 28)
    assert got.evidence == EVIDENCE
    assert got.ranks == tuple(rank_rows())
    assert got.ranks[7].cuda_graph_bytes is None
    assert got.source_log == "INFO vllm started\n"
    assert (got.source_log_bytes, got.source_log_truncated) == (18, False)
    snapshot = repo.to_snapshot(got)
    assert diff_ledgers(snapshot, snapshot).rank("3").row("kv_bytes").delta == 0


def test_ledger_input_errors_name_the_problem(write_factory: Factory) -> None:
    _deployment(write_factory)
    cases: list[tuple[LedgerIn, str]] = [
        (ledger_in(evidence={"vllm_verison": "0.21"}), "unknown evidence key 'vllm_verison'"),
        (ledger_in(evidence={"tp": "8"}), "evidence tp must be a whole number"),
        (ledger_in(evidence={"gpu_memory_utilization": 1.5}), "evidence gpu_memory_utilization"),
        (ledger_in(ranks=[LedgerRow("0"), LedgerRow("0")]), "rank '0' appears twice"),
        (ledger_in(ranks=[LedgerRow("0", kv_bytes=-1)]), "rank 0 kv_bytes = -1 is outside"),
        (ledger_in(ranks=[LedgerRow("0", kv_bytes=2**63)]), "rank 0 kv_bytes"),
        (ledger_in(ranks=[]), "at least one rank"),
        (ledger_in(log="bad\x00log"), "source log contains a NUL"),
    ]
    for ledger, message in cases:
        with pytest.raises(InvalidInput, match=re.escape(message)), write_factory.begin() as s:
            repo.add_ledger(s, "prod-a", ledger)
    with pytest.raises(NotFound, match="no deployment with slug 'ghost'"), write_factory.begin() as s:
        repo.add_ledger(s, "ghost", ledger_in())
    with write_factory() as s, pytest.raises(NotFound, match="no ledger with id 999999"):
        repo.get_ledger(s, 999_999)


def test_source_log_is_capped_keeping_head_and_tail(write_factory: Factory) -> None:
    _deployment(write_factory)
    log = "HEAD é line\n" + "middle ✓ line\n" * 20_000 + "TAIL line ☃\n"
    size = len(log.encode("utf-8"))
    with write_factory.begin() as s:
        ledger_id = repo.add_ledger(s, "prod-a", ledger_in(log=log), max_source_log_bytes=4096)
    with write_factory() as s:
        got = repo.get_ledger(s, ledger_id)
    assert got.source_log is not None
    assert got.source_log.startswith("HEAD é line\n")
    assert got.source_log.endswith("TAIL line ☃\n")
    assert len(got.source_log.encode("utf-8")) <= 4096
    assert got.source_log_truncated is True
    assert got.source_log_bytes == size
    omitted = int(re.search(r"\[kvledger: (\d+) bytes of this", got.source_log).group(1))  # type: ignore[union-attr]
    kept = len(got.source_log.encode("utf-8")) - len(
        re.search(r"\n\[kvledger:[^\]]*\]\n", got.source_log).group(0).encode("utf-8")  # type: ignore[union-attr]
    )
    assert kept + omitted == size


def test_history_list_pages_newest_first_without_source_logs(write_factory: Factory, engine: Engine) -> None:
    _deployment(write_factory)
    _deployment(write_factory, "other")
    ids = []
    for i in range(5):
        with write_factory.begin() as s:
            ids.append(repo.add_ledger(s, "prod-a", ledger_in(note=f"n{i}", log="x" * 1000)))
    with write_factory.begin() as s:
        repo.add_ledger(s, "other", ledger_in())

    statements: list[str] = []

    def record(_c: Any, _cur: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        with write_factory() as s:
            page1 = repo.list_ledgers(s, "prod-a", limit=2, offset=0)
            page3 = repo.list_ledgers(s, "prod-a", limit=2, offset=4)
            total = repo.count_ledgers(s, "prod-a")
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert [x.id for x in page1] == [ids[4], ids[3]]
    assert [x.note for x in page3] == ["n0"]
    assert total == 5
    assert page1[0].ranks == tuple(rank_rows())
    assert page1[0].source_log_bytes == 1000
    assert not hasattr(page1[0], "source_log")
    assert not any(re.search(r"\bsource_log\b(?!_)", sql) for sql in statements)


def test_save_then_get_gives_identical_document_and_summary(db_url: str, write_factory: Factory) -> None:
    with write_factory.begin() as s:
        slug = repo.save_plan(s, PLAN_DOCUMENT, PLAN_SUMMARY, "0.1.0", "H100 plan")
    # Read back through a brand-new engine: nothing cached.
    from app.db.session import make_engine, make_sessionmaker

    engine = make_engine(db_url)
    with make_sessionmaker(engine)() as s:
        plan = repo.get_plan(s, slug)
    engine.dispose()
    assert plan.document == PLAN_DOCUMENT
    assert plan.summary == PLAN_SUMMARY
    assert plan.document["kv_cache_memory_bytes"] == 2**62
    assert plan.document["ratio"] == 0.1 + 0.2
    assert (plan.slug, plan.title, plan.core_version, plan.parent_slug) == (slug, "H100 plan", "0.1.0", None)


def test_plan_slugs_are_unguessable_and_unique(write_factory: Factory) -> None:
    with write_factory.begin() as s:
        slugs = [repo.save_plan(s, {"i": i}, {}, "0.1.0") for i in range(50)]
    assert len(set(slugs)) == 50
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22,}", slug) for slug in slugs)


def test_plan_versions_and_recent_list(write_factory: Factory) -> None:
    with write_factory.begin() as s:
        v1 = repo.save_plan(s, {"v": 1}, {"r": 1}, "0.1.0", "first", listed=True)
        v2 = repo.save_plan(s, {"v": 2}, {"r": 2}, "0.1.0", "second", parent_slug=v1, listed=True)
        v3 = repo.save_plan(s, {"v": 3}, {"r": 3}, "0.1.0", "third", parent_slug=v2, listed=True)
        hidden = repo.save_plan(s, {"v": 4}, {"r": 4}, "0.1.0", "unlisted", parent_slug=v3)
        other = repo.save_plan(s, {"v": 9}, {}, "0.1.0", "fork", parent_slug=v1, listed=True)
    with write_factory() as s:
        assert [p.slug for p in repo.plan_versions(s, v3)] == [v1, v2, v3]
        assert [p.parent_slug for p in repo.plan_versions(s, v3)] == [None, v1, v2]
        assert [p.slug for p in repo.plan_versions(s, other)] == [v1, other]
        assert repo.get_plan(s, v2).parent_slug == v1
        assert repo.get_plan(s, v1).document == {"v": 1}  # the parent never changes
        recent = repo.list_listed_plans(s, limit=3)
        assert [p.slug for p in recent] == [other, v3, v2]  # the unlisted one is left out
        assert recent[0].parent_slug == v1 and all(p.listed and p.intact for p in recent)
        assert repo.get_plan(s, hidden).listed is False
        assert [p.slug for p in repo.plan_children(s, v3)] == [hidden]
        with pytest.raises(NotFound, match="no saved plan with slug 'missing'"):
            repo.get_plan(s, "missing")
    with pytest.raises(NotFound, match="no saved plan with slug 'gone'"), write_factory.begin() as s:
        repo.save_plan(s, {}, {}, "0.1.0", parent_slug="gone")
    with pytest.raises(InvalidInput, match="plan document is not plain JSON"), write_factory.begin() as s:
        repo.save_plan(s, {"x": float("nan")}, {}, "0.1.0")
    with pytest.raises(InvalidInput, match="must be a JSON object"), write_factory.begin() as s:
        repo.save_plan(s, [1, 2], {}, "0.1.0")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE saved_plan SET title = 'hacked'",
        "UPDATE saved_plan SET summary = document",
        "UPDATE ledger SET note = 'hacked'",
        "UPDATE ledger_rank SET kv_bytes = 1",
    ],
)
def test_database_refuses_updates(write_factory: Factory, engine: Engine, statement: str) -> None:
    _deployment(write_factory)
    with write_factory.begin() as s:
        repo.add_ledger(s, "prod-a", ledger_in())
        repo.save_plan(s, PLAN_DOCUMENT, PLAN_SUMMARY, "0.1.0", "original", listed=True)
    with pytest.raises(DBAPIError, match="immutable: UPDATE refused"), engine.begin() as conn:
        conn.execute(text(statement))
    with write_factory() as s:
        assert [p.title for p in repo.list_listed_plans(s)] == ["original"]
        assert repo.list_ledgers(s, "prod-a")[0].note == "boot"


def test_orm_changes_to_a_saved_plan_are_refused(write_factory: Factory) -> None:
    with write_factory.begin() as s:
        slug = repo.save_plan(s, PLAN_DOCUMENT, PLAN_SUMMARY, "0.1.0", "original")
    with pytest.raises(DBAPIError, match="immutable"), write_factory.begin() as s:
        row = s.query(SavedPlan).filter_by(slug=slug).one()
        row.title = "changed"
    with write_factory() as s:
        assert repo.get_plan(s, slug).title == "original"
    assert not any(name.startswith("update") for name in dir(repo))


def test_ledger_without_its_source_log(write_factory: Factory) -> None:
    _deployment(write_factory)
    with write_factory.begin() as s:
        ledger_id = repo.add_ledger(s, "prod-a", ledger_in(log="big log\n" * 100))
    with write_factory() as s:
        light = repo.get_ledger(s, ledger_id, with_source_log=False)
        full = repo.get_ledger(s, ledger_id)
    assert light.source_log is None
    assert full.source_log == "big log\n" * 100
    assert light.ranks == full.ranks and light.evidence == full.evidence
    assert light.source_log_bytes == full.source_log_bytes == 800


def test_readers_are_not_blocked_by_an_open_write(write_factory: Factory, read_factory: Factory) -> None:
    _deployment(write_factory)
    with write_factory.begin() as writer:
        repo.add_ledger(writer, "prod-a", ledger_in(note="uncommitted"))
        with read_factory() as reader:
            assert repo.count_ledgers(reader, "prod-a") == 0
    with read_factory() as reader:
        assert repo.count_ledgers(reader, "prod-a") == 1

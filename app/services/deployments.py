"""Deployments and their ledgers: history, one ledger, a diff of two, alerts, log import.

Theory of operation. A deployment's history page shows one page of its ledgers (newest first,
two indexed queries, no source logs), so it costs the same with ten ledgers or ten thousand.
For the chart the page is read oldest → newest: KV bytes per rank, the binding (smallest)
rank's tokens, and at every ledger whose evidence changed a reading of what changed (the
audit's words, e.g. "vLLM 0.20 → 0.21: CUDA-graph memory now subtracted from the budget").
Alerts are checked on the newest ledger. A diff matches ranks by label (`app.core.audit`).

Importing a log as a ledger lives in `app.services.ledger_import`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session, sessionmaker

from app.core import audit
from app.core.audit import ROW_FIELDS, LedgerSnapshot
from app.core.errors import ConflictError, InputError
from app.db import exchange
from app.db import repository as repo
from app.db.models import Ledger
from app.db.session import run_write

JSON = dict[str, Any]
GIB = 1024**3
MIB = 1024**2
#: Alert thresholds: free memory at start may differ this much across ranks; the post-warmup
#: reserve policy of seed 001; a rank this far from the median is an outlier.
FREE_SPREAD_BYTES = 512 * MIB
RESERVE_POLICY_BYTES = int(0.9 * GIB)
OUTLIER_FRACTION = 0.10
PAGE_SIZE = 50


@dataclass(frozen=True)
class DeploymentIn:
    slug: str
    name: str
    model: str = ""
    layout: str = ""
    hardware: str = ""


def _check_slug(slug: str, field: str = "slug") -> str:
    slug = slug.strip()
    if not repo.SLUG_RE.match(slug):
        raise InputError(field, "use 1-100 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit")
    if slug.endswith(".json"):
        raise InputError(field, "a slug must not end in .json (that is the JSON twin's address)")
    return slug


def create_deployment(factory: sessionmaker[Session], given: DeploymentIn) -> repo.DeploymentRecord:
    """Store a new deployment; InputError naming the field for bad or taken values."""
    slug = _check_slug(given.slug)
    if not given.name.strip():
        raise InputError("name", "give the deployment a name")
    for key, limit in (("name", 200), ("model", 300), ("layout", 2000), ("hardware", 2000)):
        value = getattr(given, key)
        if len(value) > limit:
            raise InputError(key, f"at most {limit} characters")
        if "\x00" in value:
            raise InputError(key, "contains a NUL character")
    try:
        return run_write(
            factory,
            lambda s: repo.create_deployment(s, slug, given.name, given.model, given.layout, given.hardware),
        )
    except repo.Conflict as exc:
        raise ConflictError("slug", str(exc)) from None
    except repo.InvalidInput as exc:
        raise InputError("", str(exc)) from None


# ---------------------------------------------------------------- history


@dataclass(frozen=True)
class HistoryPoint:
    """One ledger on the history chart."""

    ledger: repo.LedgerSummary
    min_tokens: int | None
    changes: tuple[str, ...]
    previous_id: int | None = None
    previous_slug: str | None = None


@dataclass(frozen=True)
class History:
    deployment: repo.DeploymentRecord
    total: int
    page: int
    pages: int
    ledgers: tuple[repo.LedgerSummary, ...]  # newest first
    points: tuple[HistoryPoint, ...]  # oldest first
    alerts: tuple[audit.Alert, ...]  # of the newest ledger


def evidence_readings(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, ...]:
    """What changed in the evidence between two ledgers, in words (the audit's readings first,
    then any other changed key as "key old → new"). A key unknown on either side (None) is not
    a change: the log just did not print it."""
    known = {k for k in {*before, *after} if before.get(k) is not None and after.get(k) is not None}
    diff = audit.diff_ledgers(
        LedgerSnapshot((), {k: v for k, v in before.items() if k in known}),
        LedgerSnapshot((), {k: v for k, v in after.items() if k in known}),
    )
    words = list(diff.readings)
    explained = {"vllm_version", "kv_cache_dtype", "block_size", "tp", "pp", "dp", "ep",
                 "gpu_memory_utilization", "kv_cache_memory_bytes", "max_concurrency", "max_concurrency_tokens"}
    words += [f"{c.key} {c.before} → {c.after}" for c in diff.evidence_changes if c.key not in explained]
    return tuple(words)


def min_tokens(ledger: repo.LedgerSummary) -> int | None:
    """Tokens on the binding (smallest) rank: measured, else blocks × block size."""
    block_size = ledger.evidence.get("block_size")
    size = block_size if isinstance(block_size, int) else None
    known = [t for t in (audit.rank_tokens(r, size, None) for r in ledger.ranks) if t is not None]
    return min(known) if known else None


def min_kv_bytes(ledger: repo.LedgerSummary) -> int | None:
    """KV bytes on the smallest rank (the audit's binding-rank view)."""
    known = [r.kv_bytes for r in ledger.ranks if r.kv_bytes is not None]
    return min(known) if known else None


def alerts_for(ledger: repo.LedgerSummary) -> tuple[audit.Alert, ...]:
    return tuple(audit.alerts(repo.to_snapshot(ledger), FREE_SPREAD_BYTES, RESERVE_POLICY_BYTES, OUTLIER_FRACTION))


def deployment_history(session: Session, slug: str, page: int = 1, page_size: int = PAGE_SIZE) -> History:
    """One page of a deployment's ledgers with chart points and the newest ledger's alerts."""
    deployment = repo.get_deployment(session, slug)
    total = repo.count_ledgers(session, slug)
    pages = max(1, -(-total // page_size))
    page = min(max(page, 1), pages)
    # One extra (older) ledger so the oldest point on the page also shows what changed.
    rows = repo.list_ledgers(session, slug, limit=page_size + 1, offset=(page - 1) * page_size)
    shown, older = rows[:page_size], rows[page_size:]
    chrono = list(reversed(shown))
    points = []
    previous = older[0] if older else None
    for ledger in chrono:
        changes = evidence_readings(previous.evidence, ledger.evidence) if previous is not None else ()
        points.append(HistoryPoint(ledger, min_tokens(ledger), changes, previous.id if previous else None,
                                   previous.slug if previous else None))
        previous = ledger
    newest = alerts_for(shown[0]) if shown and page == 1 else ()
    return History(deployment, total, page, pages, tuple(shown), tuple(points), newest)


def deployment_json(record: repo.DeploymentRecord) -> JSON:
    return {
        "slug": record.slug,
        "url": f"/d/{record.slug}",
        "name": record.name,
        "model": record.model,
        "layout": record.layout,
        "hardware": record.hardware,
        "created_at": record.created_at.isoformat(),
    }


def ledger_json(ledger: repo.LedgerSummary) -> JSON:
    out: JSON = {
        "id": ledger.id,
        "slug": ledger.slug,
        "url": f"/l/{ledger.slug}",
        "deployment": ledger.deployment_slug,
        "created_at": ledger.created_at.isoformat(),
        "captured_at": ledger.captured_at.isoformat() if ledger.captured_at else None,
        "note": ledger.note,
        "evidence": dict(ledger.evidence),
        "ranks": [{"rank": r.rank, **{name: r.value(name) for name in ROW_FIELDS}} for r in ledger.ranks],
        "min_kv_tokens": min_tokens(ledger),
        "source_log_bytes": ledger.source_log_bytes,
        "source_log_truncated": ledger.source_log_truncated,
        "integrity": {"intact": ledger.intact, "message": None if ledger.intact else repo.CHANGED_OUTSIDE},
    }
    if isinstance(ledger, repo.LedgerRecord):
        out["source_log"] = ledger.source_log
    return out


def alert_json(alert: audit.Alert) -> JSON:
    return {"code": alert.code, "message": alert.message, "rank": alert.rank}


def history_json(history: History) -> JSON:
    return {
        "deployment": deployment_json(history.deployment),
        "total": history.total,
        "page": history.page,
        "pages": history.pages,
        "ledgers": [ledger_json(ledger) for ledger in history.ledgers],
        "changes": [{"ledger": p.ledger.id, "slug": p.ledger.slug, "readings": list(p.changes)}
                    for p in history.points if p.changes],
        "alerts": [alert_json(a) for a in history.alerts],
        "export_url": f"/d/{history.deployment.slug}/export.json",
    }


# ---------------------------------------------------------------- one ledger, a diff


@dataclass(frozen=True)
class LedgerView:
    ledger: repo.LedgerRecord
    alerts: tuple[audit.Alert, ...]
    previous_id: int | None
    previous_slug: str | None = None


def previous_ledger(session: Session, ledger_id: int) -> tuple[int, str | None] | None:
    """The ledger just before `ledger_id` in its deployment's history, (id, slug) (one indexed query)."""
    this = select(Ledger.created_at, Ledger.deployment_id).where(Ledger.id == ledger_id).subquery()
    earlier = or_(
        Ledger.created_at < this.c.created_at,
        and_(Ledger.created_at == this.c.created_at, Ledger.id < ledger_id),
    )
    found = session.execute(
        select(Ledger.id, Ledger.slug)
        .where(Ledger.deployment_id == this.c.deployment_id, earlier)
        .order_by(Ledger.created_at.desc(), Ledger.id.desc())
        .limit(1)
    ).first()
    return (found.id, found.slug) if found is not None else None


def ledger_view(session: Session, ledger_id: int) -> LedgerView:
    ledger = repo.get_ledger(session, ledger_id)
    previous = previous_ledger(session, ledger_id)
    return LedgerView(ledger, alerts_for(ledger), previous[0] if previous else None, previous[1] if previous else None)


@dataclass(frozen=True)
class DiffView:
    a: repo.LedgerRecord
    b: repo.LedgerRecord
    diff: audit.LedgerDiff
    max_model_len: int | None


def ledger_diff(session: Session, a_id: int, b_id: int, max_model_len: int | None = None) -> DiffView:
    """Ledger `a` (before) against `b` (after): every row on every rank, tokens, evidence, words."""
    if max_model_len is not None and max_model_len <= 0:
        raise InputError("max_model_len", "max_model_len must be a positive number of tokens")
    a = repo.get_ledger(session, a_id, with_source_log=False)
    b = repo.get_ledger(session, b_id, with_source_log=False)
    diff = audit.diff_ledgers(repo.to_snapshot(a), repo.to_snapshot(b), max_model_len=max_model_len)
    return DiffView(a, b, diff, max_model_len)


def _delta_json(delta: audit.RowDelta) -> JSON:
    return {"before": delta.before, "after": delta.after, "delta": delta.delta}


def diff_json(view: DiffView) -> JSON:
    d = view.diff
    return {
        "a": ledger_json(view.a),
        "b": ledger_json(view.b),
        "ranks": [
            {"rank": r.rank, "status": r.status, "rows": {row.row: _delta_json(row) for row in r.rows},
             "tokens": _delta_json(r.tokens)}
            for r in d.ranks
        ],
        "evidence_changes": [{"key": c.key, "before": c.before, "after": c.after} for c in d.evidence_changes],
        "min_kv_bytes": _delta_json(d.min_kv_bytes),
        "min_kv_tokens": _delta_json(d.min_kv_tokens),
        "max_model_len": view.max_model_len,
        "concurrency": {"before": d.concurrency[0], "after": d.concurrency[1]},
        "readings": list(d.readings),
    }


# ---------------------------------------------------------------- export / import


def export_deployment(session: Session, slug: str) -> JSON:
    return exchange.export_deployment(session, slug)


def import_deployment(factory: sessionmaker[Session], data: object, slug: str | None = None) -> repo.DeploymentRecord:
    """Recreate an exported deployment (under `slug` if given); InputError for a bad file."""
    if not isinstance(data, Mapping):
        raise InputError("file", "the import must be a JSON object (a kvledger.deployment export)")
    if slug is not None:
        slug = _check_slug(slug)
    else:
        dep = data.get("deployment")
        if isinstance(dep, Mapping) and isinstance(dep.get("slug"), str):
            _check_slug(dep["slug"], "file")
    try:
        return run_write(factory, lambda s: exchange.import_deployment(s, data, slug=slug))
    except repo.Conflict as exc:
        raise ConflictError("slug", f"{exc}; import it under another slug") from None
    except repo.InvalidInput as exc:
        raise InputError("file", str(exc)) from None

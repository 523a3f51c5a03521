"""Saved plans and the database behind them: the service between the web layer and `app.db`.

Theory of operation. A saved plan is a plan document plus the JSON result the core computed
for it when it was saved (its *summary*) and that core's version. Saving validates and runs
the document first (CPU, outside any transaction), then stores it in one short write
transaction (`run_write`: SQLite's write lock is taken at BEGIN, so concurrent savers queue
instead of failing). Opening a saved plan reads it back, recomputes the same document with
today's core, and compares the two results key by key: if anything moved, the differences
are listed in plain words (core version, which result keys changed and by how much). The page
shows the saved numbers — the record a colleague shared — with that comparison beside them.

Deployments and ledgers (history, diff, alerts, export/import) live in `app.services.deployments`,
importing a log as a ledger in `app.services.ledger_import`, `prepare_database` (migrations plus demo
data) in `app.services.demo_data`, the `Database` itself in `app.db.session`.
No HTTP in this module: errors are `InputError` (bad input, with a field) or the repository's
`NotFound`/`Conflict`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app import __version__ as CORE_VERSION
from app.core.errors import InputError
from app.db import repository as repo
from app.db.session import run_write
from app.services import plans

JSON = dict[str, Any]
#: Result keys that are bookkeeping, not numbers to compare between the saved and today's result.
IGNORED_KEYS = frozenset({"core_version"})
#: At most this many differences are listed in words (the JSON twin lists all).
MAX_WORDS = 12
MAX_TITLE_CHARS = 300


# ---------------------------------------------------------------- saving


@dataclass(frozen=True)
class Saved:
    slug: str
    parent_slug: str | None
    result: JSON


def plan_title(doc: Mapping[str, Any], result: Mapping[str, Any], title: str = "") -> str:
    """The title to store: the one given, else the document's, else the model's name."""
    for candidate in (title, doc.get("title"), (result.get("model") or {}).get("name")):
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()[:MAX_TITLE_CHARS]
    return "Untitled plan"


def _computed_from_stored_form(doc: Mapping[str, Any]) -> tuple[JSON, JSON]:
    """The document as the database will hand it back (a JSON round trip) and its result computed
    from that form, also checked to be storable JSON: what is saved is what opens again."""
    try:
        stored = json.loads(json.dumps(dict(doc), allow_nan=False))
    except (TypeError, ValueError):
        raise InputError("", "the plan document is not plain JSON (no NaN, Infinity or non-JSON values)") from None
    result = plans.run_plan(stored)
    try:
        result = json.loads(json.dumps(result, allow_nan=False))
    except (TypeError, ValueError):
        raise InputError("", "this plan's result cannot be stored (a value out of range)") from None
    return stored, result


def save_document(
    factory: sessionmaker[Session], doc: object, title: str = "", parent_slug: str | None = None,
    *, listed: bool = False,
) -> Saved:
    """Validate and compute `doc`, then store it as a new immutable version (in the /p list only
    if `listed`); InputError when the document is invalid, NotFound when `parent_slug` names no
    saved plan."""
    if not isinstance(doc, Mapping):
        raise InputError("", "a plan document must be a JSON object")
    if "\x00" in title:
        raise InputError("title", "the title contains a NUL character")
    stored, result = _computed_from_stored_form(doc)
    parent = parent_slug.strip() if parent_slug else None

    def work(session: Session) -> str:
        given = title.strip() or doc.get("title")
        if parent and not (isinstance(given, str) and given.strip()):
            given = repo.get_plan(session, parent).title  # a new version keeps its plan's title
        name = plan_title(doc, result, given if isinstance(given, str) else "")
        return repo.save_plan(session, stored, result, CORE_VERSION, name, parent or None, listed=listed)

    try:
        slug = run_write(factory, work)
    except repo.InvalidInput as exc:
        raise InputError("document", str(exc)) from None
    return Saved(slug, parent or None, result)


# ---------------------------------------------------------------- opening


@dataclass(frozen=True)
class Difference:
    """One leaf of the result that differs between the saved and today's computation."""

    key: str
    saved: Any
    today: Any

    @property
    def delta(self) -> float | int | None:
        if _is_number(self.saved) and _is_number(self.today):
            value: float | int = self.today - self.saved
            return value
        return None

    def as_json(self) -> JSON:
        return {"key": self.key, "saved": self.saved, "today": self.today, "delta": self.delta}


@dataclass(frozen=True)
class Recomputed:
    """Today's computation of a saved document, compared with the saved summary."""

    core_version: str
    result: JSON | None
    error: str | None
    differences: tuple[Difference, ...] = ()
    words: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return self.error is None and not self.differences

    def as_json(self) -> JSON:
        return {
            "core_version": self.core_version,
            "same": self.same,
            "error": self.error,
            "explanation": list(self.words),
            "differences": [d.as_json() for d in self.differences],
        }


@dataclass(frozen=True)
class OpenedPlan:
    record: repo.PlanRecord
    versions: tuple[repo.PlanSummary, ...]
    recomputed: Recomputed = field(repr=False)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _leaves(value: Any, path: str, out: dict[str, Any]) -> None:
    """Flatten nested JSON to `path → scalar` (lists by index; ranks by their label)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            _leaves(item, f"{path}.{key}" if path else str(key), out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            label = item.get("rank") if isinstance(item, Mapping) and path == "ranks" else i
            _leaves(item, f"{path}[{label}]", out)
    else:
        out[path] = value


def differences(saved: Mapping[str, Any], today: Mapping[str, Any]) -> tuple[Difference, ...]:
    """Every leaf of two results that differs (floats compared to 1e-9 relative)."""
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    _leaves({k: v for k, v in saved.items() if k not in IGNORED_KEYS}, "", a)
    _leaves({k: v for k, v in today.items() if k not in IGNORED_KEYS}, "", b)
    found = []
    for key in [*a, *(k for k in b if k not in a)]:
        old, new = a.get(key), b.get(key)
        if isinstance(old, int | float) and isinstance(new, int | float) and math.isclose(old, new, rel_tol=1e-9):
            continue
        if old != new or (key in a) != (key in b):
            found.append(Difference(key, old, new))
    return tuple(found)


def _show(key: str, value: Any) -> str:
    if value is None:
        return "none"
    if _is_number(value) and key.endswith("_bytes"):
        return f"{value / 1024**3:,.2f} GiB"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}"
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "…"


def _difference_words(diff: Difference) -> str:
    text = f"{diff.key}: {_show(diff.key, diff.saved)} → {_show(diff.key, diff.today)}"
    delta = diff.delta
    if delta is not None:
        sign = "+" if delta > 0 else "−"
        text += f" ({sign}{_show(diff.key, abs(delta))}"
        if _is_number(diff.saved) and diff.saved:
            text += f", {sign}{abs(delta) / abs(diff.saved):.1%}"
        text += ")"
    return text


def explain(saved_core: str, diffs: Sequence[Difference], intact: bool = True) -> tuple[str, ...]:
    """Plain words for why today's numbers differ from the saved ones (a record whose content
    hash does not match is blamed on the change outside KV Ledger, not on the catalogue)."""
    if not diffs:
        return ()
    words = []
    if not intact:
        words.append(f"{repo.CHANGED_OUTSIDE}: its stored content no longer matches the hash saved with it")
    elif saved_core != CORE_VERSION:
        words.append(f"this plan was computed by core {saved_core}; today's core is {CORE_VERSION}")
    else:
        words.append(f"same core version ({CORE_VERSION}), but its inputs (catalogue or defaults) changed")
    groups: dict[str, int] = {}
    for diff in diffs:
        head = diff.key.split("[", 1)[0].split(".", 1)[0]
        groups[head] = groups.get(head, 0) + 1
    words.append("changed: " + ", ".join(f"{key} ({n})" if n > 1 else key for key, n in groups.items()))
    top = [d for d in diffs if "." not in d.key and "[" not in d.key] or list(diffs)
    words += [_difference_words(d) for d in top[: MAX_WORDS - 2]]
    return tuple(words)


def recompute(record: repo.PlanRecord) -> Recomputed:
    """Run the saved document through today's core and compare with the saved summary."""
    try:
        today = plans.run_plan(record.document)
    except InputError as exc:
        return Recomputed(CORE_VERSION, None, f"today's core cannot compute this plan: {exc.message} ({exc.field})")
    saved = record.summary if isinstance(record.summary, Mapping) else {}
    diffs = differences(saved, today)
    return Recomputed(CORE_VERSION, today, None, diffs, explain(record.core_version, diffs, record.intact))


def open_plan(session: Session, slug: str) -> OpenedPlan:
    """A saved plan, its version chain (first version first) and today's recomputation."""
    record = repo.get_plan(session, slug)
    versions = tuple(repo.plan_versions(session, slug))
    return OpenedPlan(record, versions, recompute(record))


def children(session: Session, slug: str, limit: int = 20) -> list[repo.PlanSummary]:
    """Newer versions made from this plan (its direct children), newest first."""
    return repo.plan_children(session, slug, limit)


def integrity_json(intact: bool) -> JSON:
    """What every JSON read of a stored record says about its content hash."""
    return {"intact": intact, "message": None if intact else repo.CHANGED_OUTSIDE}


def plan_json(opened: OpenedPlan, url: str) -> JSON:
    """The JSON twin of a saved plan: the saved result keys (as `kvledger plan --json`), plus
    the slug, parent, creation time, core version, the version chain and today's comparison."""
    record = opened.record
    summary = dict(record.summary) if isinstance(record.summary, Mapping) else {}
    return {
        **summary,
        "slug": record.slug,
        "url": url,
        "title": record.title,
        "parent": record.parent_slug,
        "created_at": record.created_at.isoformat(),
        "core_version": record.core_version,
        "document": record.document,
        "versions": [v.slug for v in opened.versions],
        "recomputed": opened.recomputed.as_json(),
        "listed": record.listed,
        "integrity": integrity_json(record.intact),
    }


def summary_json(plan: repo.PlanSummary) -> JSON:
    return {
        "slug": plan.slug,
        "url": f"/p/{plan.slug}",
        "title": plan.title,
        "parent": plan.parent_slug,
        "core_version": plan.core_version,
        "created_at": plan.created_at.isoformat(),
        "integrity": integrity_json(plan.intact),
    }


def saved_result(session: Session, slug: str) -> JSON:
    """A saved plan's result exactly as it was saved (saved plans never change), with its link.
    Raises NotFound when no plan has that slug."""
    record = repo.get_plan(session, slug)
    summary = dict(record.summary) if isinstance(record.summary, Mapping) else {}
    return {**summary, "url": f"/p/{record.slug}", "slug": record.slug, "title": record.title,
            "integrity": integrity_json(record.intact)}


"""Base plan documents that a what-if URL refers to by id (`?base=<id>`).

Imported logs, pasted config.json files and nvidia-smi output become whole plan documents
(measured ranks, a model config) far too large for a query string. They are stored here under
a content-addressed id (the first 16 hex digits of the sha256 of the canonical JSON), so the
same import always yields the same URL. `MemoryBaseStore` keeps them in memory, bounded in
count and bytes (oldest out first); `DurableBaseStore` writes them through to the database,
capped per client and overall and expiring (`app.db.bases`), so a what-if URL of an import
still opens after a restart and on another app server until it expires. The memory copy is a
cache in front of the database.

Stored documents are immutable: a document is copied once when it is stored, and `get` returns
that stored object itself, never a copy (deep-copying a 1,024-rank document twice per slider
tick was 40 % of the request). Readers must not mutate it: `plan_query.plan_from_query` copies
only the path it sets, and a test asserts a stored document is unchanged after requests.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.core.errors import InputError
from app.db import bases
from app.db.bases import BaseLimits, BaseTooLarge
from app.db.models import utcnow
from app.db.session import run_write
from app.services.clients import CLIENT
from app.settings import Settings

log = logging.getLogger(__name__)


class BaseStore(Protocol):
    def put(self, doc: Mapping[str, object]) -> str: ...

    def put_many(self, docs: Sequence[Mapping[str, object]]) -> list[str | None]: ...

    def get(self, base_id: str) -> dict[str, object] | None: ...


def canonical(doc: Mapping[str, object]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _encoded(doc: Mapping[str, object]) -> tuple[bytes, str]:
    data = canonical(doc)
    return data, hashlib.sha256(data).hexdigest()[:16]


def document_id(doc: Mapping[str, object]) -> str:
    """The content address of a plan document."""
    return hashlib.sha256(canonical(doc)).hexdigest()[:16]


class MemoryBaseStore:
    """A thread-safe, bounded, in-memory BaseStore. Fixed entries (the demo) are never evicted."""

    def __init__(self, capacity: int = 512, fixed: Mapping[str, Mapping[str, object]] | None = None,
                 capacity_bytes: int = 64 * 1024 * 1024) -> None:
        self.capacity, self.capacity_bytes = capacity, capacity_bytes
        self._fixed = {key: copy.deepcopy(dict(doc)) for key, doc in (fixed or {}).items()}
        self._docs: OrderedDict[str, tuple[dict[str, object], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, doc: Mapping[str, object], size: int | None = None) -> str:
        base_id = document_id(doc)
        size = len(canonical(doc)) if size is None else size
        with self._lock:
            old = self._docs.pop(base_id, None)
            if old is None:  # the same id is the same content: keep the stored copy
                self._docs[base_id] = (copy.deepcopy(dict(doc)), size)
                self._bytes += size
            else:
                self._docs[base_id] = old
            while len(self._docs) > self.capacity or (self._bytes > self.capacity_bytes and len(self._docs) > 1):
                self._bytes -= self._docs.popitem(last=False)[1][1]
        return base_id

    def put_many(self, docs: Sequence[Mapping[str, object]]) -> list[str | None]:
        return [self.put(doc) for doc in docs]

    def get(self, base_id: str) -> dict[str, object] | None:
        """The stored document itself (immutable: read it, never change it)."""
        fixed = self._fixed.get(base_id)
        if fixed is not None:
            return fixed
        with self._lock:
            entry = self._docs.get(base_id)
        return entry[0] if entry is not None else None


def base_limits(settings: Settings) -> BaseLimits:
    return BaseLimits(settings.base_ttl_s, settings.base_client_bytes, settings.base_max_bytes)


class DurableBaseStore:
    """A MemoryBaseStore in front of the database table `base_document` (caps and expiry in `limits`).

    `database` returns the app's write session factory when storage is available. A database
    error never loses the user's what-if: the document stays in memory and the error is logged.
    A document larger than one client's allowance is an InputError (422).
    """

    def __init__(self, memory: MemoryBaseStore, database: Callable[[], sessionmaker[Session] | None],
                 limits: BaseLimits | None = None, clock: Callable[[], dt.datetime] = utcnow) -> None:
        self.memory, self.database = memory, database
        self.limits, self.now = limits or BaseLimits(), clock

    def put(self, doc: Mapping[str, object]) -> str:
        data = canonical(doc)
        base_id = hashlib.sha256(data).hexdigest()[:16]
        try:
            factory = self.database()
            if factory is not None:
                run_write(factory, lambda s: bases.put(s, self.limits, base_id=base_id, document=doc, size=len(data),
                                                       owner=CLIENT.get(), now=self.now()))
        except BaseTooLarge as exc:
            raise InputError("", f"{exc}. Save it as a plan instead, or trim it.") from None
        except SQLAlchemyError as exc:
            log.warning("base document %s kept in memory only: %s", base_id, exc)
        return self.memory.put(doc, len(data))

    def put_many(self, docs: Sequence[Mapping[str, object]]) -> list[str | None]:
        """Store several documents (an imported log's plans) in one transaction. Only as many as
        fit one client's allowance together are stored (None for the rest): stored one by one, the
        later ones would evict the earlier ones, and their links would be dead on arrival."""
        out: list[str | None] = []
        items: list[tuple[str, Mapping[str, object], int]] = []
        total, seen = 0, set()
        known: dict[int, tuple[bytes, str]] = {}  # one object given again (runs sharing a plan): one encoding
        for doc in docs:
            pair = known.get(id(doc))
            if pair is None:
                pair = known[id(doc)] = _encoded(doc)
            data, base_id = pair
            if base_id not in seen and total + len(data) > self.limits.client_bytes:
                out.append(None)
                continue
            if base_id not in seen:
                seen.add(base_id)
                total += len(data)
                items.append((base_id, doc, len(data)))
            out.append(base_id)
        try:
            factory = self.database()
            if factory is not None and items:
                run_write(factory, lambda s: bases.put_many(s, self.limits, items, owner=CLIENT.get(), now=self.now()))
        except SQLAlchemyError as exc:
            log.warning("%d base documents kept in memory only: %s", len(items), exc)
        for _, doc, size in items:
            self.memory.put(doc, size)
        return out

    def get(self, base_id: str) -> dict[str, object] | None:
        doc = self.memory.get(base_id)
        if doc is not None:
            return doc
        try:
            factory = self.database()
            if factory is None:
                return None
            with factory() as session:
                stored = bases.get(session, self.limits, base_id, self.now())
        except SQLAlchemyError as exc:
            log.warning("base document %s unavailable: %s", base_id, exc)
            return None
        if stored is None:
            return None
        self.memory.put(stored)
        return self.memory.get(base_id) or stored

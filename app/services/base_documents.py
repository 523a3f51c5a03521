"""Base plan documents that a what-if URL refers to by id (`?base=<id>`).

Imported logs, pasted config.json files and nvidia-smi output become whole plan documents
(measured ranks, a model config) far too large for a query string. They are stored here under
a content-addressed id (the first 16 hex digits of the sha256 of the canonical JSON), so the
same import always yields the same URL. `MemoryBaseStore` keeps them in memory, bounded
(oldest out first); `DurableBaseStore` writes them through to the database as well, so a
what-if URL of an import still opens after a restart and on another app server.

Stored documents are immutable: a document is copied once when it is stored, and `get` returns
that stored object itself, never a copy (deep-copying a 1,024-rank document twice per slider
tick was 40 % of the request). Readers must not mutate it: `plan_query.plan_from_query` copies
only the path it sets, and a test asserts a stored document is unchanged after requests.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Protocol

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from app.db import repository

log = logging.getLogger(__name__)


class BaseStore(Protocol):
    def put(self, doc: Mapping[str, object]) -> str: ...

    def get(self, base_id: str) -> dict[str, object] | None: ...


def document_id(doc: Mapping[str, object]) -> str:
    """The content address of a plan document."""
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class MemoryBaseStore:
    """A thread-safe, bounded, in-memory BaseStore. Fixed entries (the demo) are never evicted."""

    def __init__(self, capacity: int = 512, fixed: Mapping[str, Mapping[str, object]] | None = None) -> None:
        self.capacity = capacity
        self._fixed = {key: copy.deepcopy(dict(doc)) for key, doc in (fixed or {}).items()}
        self._docs: OrderedDict[str, dict[str, object]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, doc: Mapping[str, object]) -> str:
        base_id = document_id(doc)
        with self._lock:
            if base_id not in self._docs:  # the same id is the same content: keep the stored copy
                self._docs[base_id] = copy.deepcopy(dict(doc))
            self._docs.move_to_end(base_id)
            while len(self._docs) > self.capacity:
                self._docs.popitem(last=False)
        return base_id

    def get(self, base_id: str) -> dict[str, object] | None:
        """The stored document itself (immutable: read it, never change it)."""
        fixed = self._fixed.get(base_id)
        if fixed is not None:
            return fixed
        with self._lock:
            return self._docs.get(base_id)


class DurableBaseStore:
    """A MemoryBaseStore in front of the database table `base_document`.

    `database` returns the app's session factory when storage is available. A database error
    never loses the user's what-if: the document stays in memory and the error is logged.
    """

    def __init__(self, memory: MemoryBaseStore, database: Callable[[], sessionmaker[Session] | None]) -> None:
        self.memory = memory
        self.database = database

    def put(self, doc: Mapping[str, object]) -> str:
        base_id = self.memory.put(doc)
        try:
            factory = self.database()
            if factory is not None:
                with factory() as session, session.begin():
                    repository.put_base_document(session, base_id, doc)
        except (SQLAlchemyError, repository.RepositoryError) as exc:
            log.warning("base document %s kept in memory only: %s", base_id, exc)
        return base_id

    def get(self, base_id: str) -> dict[str, object] | None:
        doc = self.memory.get(base_id)
        if doc is not None:
            return doc
        try:
            factory = self.database()
            if factory is None:
                return None
            with factory() as session:
                stored = repository.get_base_document(session, base_id)
        except SQLAlchemyError as exc:
            log.warning("base document %s unavailable: %s", base_id, exc)
            return None
        if stored is None:
            return None
        self.memory.put(stored)
        return self.memory.get(base_id) or stored

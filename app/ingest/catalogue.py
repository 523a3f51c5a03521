"""The shipped model catalogue: Hugging Face ``config.json`` files stored as package data.

Each model lives in ``app/data/catalogue/<slug>.json``::

    {"slug", "name", "hf_id", "family",
     "evidence": "verbatim" | "verbatim-in-code" | "constructed",
     "source": {"repo", "path", "commit"} | null,
     "sha256", "sha256_of": "verbatim bytes" | "canonical json",
     "notes", "config": {...}}

For ``verbatim`` entries the exact bytes read from the public source are kept in
``app/data/catalogue/raw/<slug>.config.json`` and ``sha256`` is taken over those bytes.
For the others there are no original bytes, so ``sha256`` is taken over the canonical JSON
form of ``config`` (see :func:`canonical_config_sha256`). A plan that uses a catalogue model
pins that sha256.

``CatalogueEntry.config`` is read-only: objects are ``MappingProxyType`` and JSON arrays are
tuples. Use :meth:`CatalogueEntry.config_dict` for a plain, mutable ``dict``/``list`` copy.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from types import MappingProxyType
from typing import Literal, cast

__all__ = [
    "CatalogueEntry",
    "CatalogueError",
    "Evidence",
    "canonical_config_sha256",
    "config_sha256",
    "get_model",
    "list_models",
    "raw_config_bytes",
    "search_models",
]

Evidence = Literal["verbatim", "verbatim-in-code", "constructed"]
_EVIDENCE: frozenset[str] = frozenset({"verbatim", "verbatim-in-code", "constructed"})
_SHA_OF: frozenset[str] = frozenset({"verbatim bytes", "canonical json"})


class CatalogueError(RuntimeError):
    """The packaged catalogue data is malformed (a packaging bug, not a user error)."""


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    slug: str
    name: str
    hf_id: str
    family: str
    evidence: Evidence
    source_repo: str | None
    source_path: str | None
    source_commit: str | None
    sha256: str
    notes: str
    config: Mapping[str, object]
    sha256_of: str = "verbatim bytes"
    index_total_bytes: int | None = None  # the checkpoint's safetensors metadata.total_size, when sourced
    index_source: str | None = None
    # Hugging Face ids of checkpoints with this entry's memory shape (e.g. the -Instruct twin, or the repo
    # renamed: meta-llama/Meta-Llama-3.1-8B → meta-llama/Llama-3.1-8B); a logged model name matches them
    same_shape_ids: tuple[str, ...] = ()

    @property
    def is_verbatim(self) -> bool:
        return self.evidence == "verbatim"

    def config_dict(self) -> dict[str, object]:
        """A fresh, mutable, plain-JSON copy of ``config`` (dicts and lists)."""
        thawed = _thaw(self.config)
        assert isinstance(thawed, dict)
        return thawed

    @property
    def text_config(self) -> Mapping[str, object]:
        """The language-model part of the config (``text_config`` for multimodal configs)."""
        inner = self.config.get("text_config")
        if isinstance(inner, Mapping):
            return cast(Mapping[str, object], inner)
        return self.config


def config_sha256(config_text: str) -> str:
    """sha256 (hex) of a config.json text, over its UTF-8 bytes exactly as given."""
    return hashlib.sha256(config_text.encode("utf-8")).hexdigest()


def canonical_config_sha256(config: Mapping[str, object]) -> str:
    """sha256 (hex) of ``json.dumps(config, sort_keys=True, separators=(",", ":"))``."""
    text = json.dumps(_thaw(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _catalogue_dir() -> Traversable:
    return resources.files("app").joinpath("data", "catalogue")


def _freeze(value: object) -> object:
    if isinstance(value, dict):
        return MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: object) -> object:
    if isinstance(value, Mapping):
        return {str(k): _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _str(doc: Mapping[str, object], key: str, where: str) -> str:
    value = doc.get(key)
    if not isinstance(value, str) or not value:
        raise CatalogueError(f"{where}: field {key!r} must be a non-empty string")
    return value


def _opt_str(doc: Mapping[str, object], key: str) -> str | None:
    value = doc.get(key)
    return value if isinstance(value, str) else None


def _parse_entry(doc: object, where: str) -> CatalogueEntry:
    if not isinstance(doc, dict):
        raise CatalogueError(f"{where}: expected a JSON object")
    evidence = _str(doc, "evidence", where)
    if evidence not in _EVIDENCE:
        raise CatalogueError(f"{where}: unknown evidence {evidence!r}")
    sha_of = _str(doc, "sha256_of", where)
    if sha_of not in _SHA_OF:
        raise CatalogueError(f"{where}: unknown sha256_of {sha_of!r}")
    config = doc.get("config")
    if not isinstance(config, dict):
        raise CatalogueError(f"{where}: field 'config' must be an object")
    source = doc.get("source")
    if source is not None and not isinstance(source, dict):
        raise CatalogueError(f"{where}: field 'source' must be an object or null")
    src: Mapping[str, object] = source or {}
    frozen = _freeze(config)
    assert isinstance(frozen, Mapping)
    return CatalogueEntry(
        slug=_str(doc, "slug", where),
        name=_str(doc, "name", where),
        hf_id=_str(doc, "hf_id", where),
        family=_str(doc, "family", where),
        evidence=cast(Evidence, evidence),
        source_repo=_opt_str(src, "repo"),
        source_path=_opt_str(src, "path"),
        source_commit=_opt_str(src, "commit"),
        sha256=_str(doc, "sha256", where),
        notes=str(doc.get("notes") or ""),
        config=cast(Mapping[str, object], frozen),
        sha256_of=sha_of,
        index_total_bytes=_index_total(doc, where),
        index_source=_index_source(doc),
        same_shape_ids=_same_shape_ids(doc, where),
    )


def _same_shape_ids(doc: Mapping[str, object], where: str) -> tuple[str, ...]:
    """``same_shape_ids``: Hugging Face ids whose config.json has this entry's memory shape (the
    entry's ``notes`` say why); the lookup by name matches them."""
    ids = doc.get("same_shape_ids", [])
    if not isinstance(ids, list) or not all(isinstance(i, str) and "/" in i for i in ids):
        raise CatalogueError(f"{where}: same_shape_ids must be a list of Hugging Face ids (owner/name)")
    return tuple(ids)


def _index_total(doc: Mapping[str, object], where: str) -> int | None:
    """``safetensors_total_size: {"bytes": N, "source": "..."}``: the checkpoint's
    model.safetensors.index.json metadata.total_size, copied from a cited public copy."""
    pinned = doc.get("safetensors_total_size")
    if pinned is None:
        return None
    value = pinned.get("bytes") if isinstance(pinned, Mapping) else None
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0 or not _index_source(doc):
        raise CatalogueError(f"{where}: safetensors_total_size must be {{bytes: positive int, source: str}}")
    return value


def _index_source(doc: Mapping[str, object]) -> str | None:
    pinned = doc.get("safetensors_total_size")
    source = pinned.get("source") if isinstance(pinned, Mapping) else None
    return str(source) if source else None


@cache
def list_models() -> tuple[CatalogueEntry, ...]:
    """Every catalogue entry, sorted by name (case-insensitive). Cached."""
    base = _catalogue_dir()
    entries: list[CatalogueEntry] = []
    for item in base.iterdir():
        if not item.is_file() or not item.name.endswith(".json") or item.name == "index.json":
            continue
        where = f"catalogue/{item.name}"
        try:
            doc = json.loads(item.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise CatalogueError(f"{where}: invalid JSON: {exc}") from exc
        entry = _parse_entry(doc, where)
        if item.name != f"{entry.slug}.json":
            raise CatalogueError(f"{where}: slug {entry.slug!r} does not match the file name")
        entries.append(entry)
    entries.sort(key=lambda e: (e.name.casefold(), e.name))
    return tuple(entries)


@cache
def _lookup() -> Mapping[str, CatalogueEntry]:
    table: dict[str, CatalogueEntry] = {}
    for entry in list_models():
        for key in (entry.slug, entry.name, entry.hf_id):
            table.setdefault(key.casefold(), entry)
    for entry in list_models():  # after every entry's own names: a twin's id never hides an entry
        for key in entry.same_shape_ids:
            table.setdefault(key.casefold(), entry)
    return MappingProxyType(table)


def _suggestions(key: str, n: int = 5) -> list[str]:
    """Up to ``n`` catalogue names close to ``key``: search hits first, then difflib matches."""
    names: list[str] = [e.name for e in search_models(key, limit=n)]
    by_key = _lookup()
    for match in difflib.get_close_matches(key.strip().casefold(), list(by_key), n=n * 3, cutoff=0.5):
        name = by_key[match].name
        if name not in names:
            names.append(name)
    return names[:n]


def find_model(key: str) -> CatalogueEntry | None:
    """The model a slug, name or Hugging Face id names (case-insensitive), or None: an exact
    lookup, without `get_model`'s close-match search (which costs a difflib pass over the whole
    catalogue: ~0.1 s, once per run of an imported log whose model is not catalogued)."""
    return _lookup().get(key.strip().casefold())


def get_model(key: str) -> CatalogueEntry:
    """Find a model by slug, name or Hugging Face id (case-insensitive).

    Raises ``KeyError`` naming close matches when the key is unknown.
    """
    entry = _lookup().get(key.strip().casefold())
    if entry is not None:
        return entry
    hints = _suggestions(key)
    hint = f"; did you mean: {', '.join(hints)}?" if hints else ""
    raise KeyError(f"unknown model {key!r} (not a catalogue slug, name or Hugging Face id){hint}")


def _tokens(text: str) -> list[str]:
    for sep in "/-_":
        text = text.replace(sep, " ")
    return [t for t in text.split() if t]


def _fields(entry: CatalogueEntry) -> tuple[str, ...]:
    return (entry.slug, entry.name.casefold(), entry.hf_id.casefold())


def _exact_score(query: str, entry: CatalogueEntry) -> float:
    """3 exact, 2..3 substring, 1.5 every query token occurs, 1.25 match ignoring separators."""
    fields = _fields(entry)
    if query in fields:
        return 3.0
    hits = [f for f in fields if query in f]
    if hits:
        return 2.0 + min(len(query) / min(len(f) for f in hits), 0.99)
    tokens = _tokens(query)
    if tokens and all(any(t in f for f in fields) for t in tokens):
        return 1.5
    squashed = "".join(tokens)
    if squashed and any(squashed in "".join(_tokens(f)) for f in fields):
        return 1.25
    return 0.0


def _fuzzy_score(query: str, entry: CatalogueEntry) -> float:
    candidates: list[str] = []
    for field in _fields(entry):
        candidates.append(field)
        candidates.extend(_tokens(field))
    return max(difflib.SequenceMatcher(None, query, c).ratio() for c in candidates)


def search_models(query: str, limit: int = 20) -> tuple[CatalogueEntry, ...]:
    """Entries whose name, slug or hf_id match ``query``, best first.

    Exact, substring and all-tokens matches (case-insensitive) come first; only when there are
    none does a fuzzy match (difflib ratio >= 0.6 against a field or one of its tokens) apply.
    An empty query returns the first ``limit`` entries in name order.
    """
    if limit <= 0:
        return ()
    q = query.strip().casefold()
    if not q:
        return list_models()[:limit]
    scored = [(s, e) for e in list_models() if (s := _exact_score(q, e)) > 0.0]
    if not scored:
        scored = [(s, e) for e in list_models() if (s := _fuzzy_score(q, e)) >= 0.6]
    scored.sort(key=lambda se: (-se[0], se[1].name.casefold()))
    return tuple(e for _, e in scored[:limit])


def raw_config_bytes(entry: CatalogueEntry) -> bytes | None:
    """The verbatim config.json bytes of a ``verbatim`` entry, else ``None``."""
    if entry.evidence != "verbatim":
        return None
    return _catalogue_dir().joinpath("raw", f"{entry.slug}.config.json").read_bytes()

"""Issue 11: no module-level mutable caches of results in `app/services` and `app/web`.

The source is scanned (AST), not imported, so a cache anywhere in those packages fails here:

- a functools cache (`cache`, `lru_cache`, however imported) on a module-level function or a
  method, or wrapped around a function at module level;
- a mutable container (dict, list, set, OrderedDict, …) bound at module or class level that a
  function mutates (`X[k] = v`, `X.setdefault(…)`, `X.append(…)`, …), or a `global` rebinding.

A sub-result worth reusing lives in a cache the app owns (`app.services.memo.PlanMemo`,
`PlanCache`, `PlanTerms`), one per app, bounded. A table built once at import from data shipped
with the code (not from request input) may stay when it is an immutable value; those tables are
named in ALLOWED_TABLES with why, and checked to be immutable all the way down.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path
from types import MappingProxyType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("app/services", "app/web")
CACHE_DECORATORS = frozenset({"cache", "lru_cache"})
MUTABLE_CALLS = frozenset({"dict", "list", "set", "OrderedDict", "defaultdict", "Counter", "deque", "bytearray",
                           "WeakValueDictionary", "WeakKeyDictionary"})
MUTATING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "clear",
                              "remove", "discard", "move_to_end", "appendleft", "__setitem__", "__delitem__"})

#: Immutable tables computed at import that stand where a memo stood, and why each may stay.
ALLOWED_TABLES: dict[str, str] = {
    "app.web.plan.form:CATALOGUE_OPTIONS": "the model select's options: the catalogue is data shipped with the app",
    "app.web.plan.form:GPU_OPTIONS": "the GPU list's options: the presets are constants in app.core.gpus",
    "app.services.plan_query:LIMITS": "each knob's bounds, read from the validator's schema (code, not input)",
}

#: Module-level registries a function fills, allowed because that function is only ever called
#: at the top level of a module (at import, never by a request; the test checks every call).
ALLOWED_REGISTRIES: dict[str, tuple[str, str]] = {
    "app/web/openapi.py:_BODIES": ("register_body", "the OpenAPI body schemas each wing names at import"),
    "app/web/openapi.py:_NEEDS": ("register_body", "the schemas each of those refers to"),
}


def _is_cache_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    return name in CACHE_DECORATORS


def _is_mutable(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        return name in MUTABLE_CALLS
    return False


def _bound_containers(body: list[ast.stmt]) -> set[str]:
    """Names a module or class body binds to a mutable container."""
    names: set[str] = set()
    for stmt in body:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign) and _is_mutable(stmt.value):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign) and _is_mutable(stmt.value):
            targets = [stmt.target]
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _mutated_name(node: ast.AST, owners: frozenset[str]) -> str | None:
    """The container a statement or call mutates: `NAME` itself, or `OWNER.NAME` for an owner in
    `owners` (a class's name, `cls`, `self`)."""

    def name_of(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return expr.id
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in owners:
            return expr.attr
        return None

    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        for target in targets:
            if isinstance(target, ast.Subscript):
                return name_of(target.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATING_METHODS:
        return name_of(node.func.value)
    return None


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _instance_attributes(cls: ast.ClassDef) -> set[str]:
    """`self.X = …` anywhere in the class: X is the instance's own, not the class's."""
    return {t.attr for n in ast.walk(cls) if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def _line(node: ast.AST) -> int:
    return int(getattr(node, "lineno", 0))


def problems(source: str, where: str) -> list[str]:
    """Every result cache the scan finds in one module's source."""
    tree = ast.parse(source)
    found: list[str] = []
    for fn in _functions(tree):
        if any(_is_cache_decorator(d) for d in fn.decorator_list):
            found.append(f"{where}:{fn.lineno}: functools cache on {fn.name}()")
        found += [f"{where}:{n.lineno}: global {', '.join(n.names)} in {fn.name}()"
                  for n in ast.walk(fn) if isinstance(n, ast.Global)]
    for stmt in tree.body:  # x = functools.lru_cache(maxsize=…)(f) at module level
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Call) and _is_cache_decorator(value.func):
            found.append(f"{where}:{stmt.lineno}: functools cache at module level")
    module_level = _bound_containers(tree.body)
    for fn in _functions(tree):
        for node in ast.walk(fn):
            name = _mutated_name(node, frozenset())
            if name in module_level and f"{where}:{name}" not in ALLOWED_REGISTRIES:
                found.append(f"{where}:{_line(node)}: {fn.name}() mutates the module-level {name}")
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        class_level = _bound_containers(cls.body)
        shared = class_level - _instance_attributes(cls)
        for fn in _functions(cls):
            for node in ast.walk(fn):
                name = _mutated_name(node, frozenset({cls.name, "cls", "self"}))
                if name in shared:
                    found.append(f"{where}:{_line(node)}: {cls.name}.{fn.name}() mutates the class-level {name}")
    return found


def _sources() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))


def test_services_and_web_keep_no_result_caches() -> None:
    files = _sources()
    assert len(files) > 40  # the scan sees the packages
    found = [p for f in files for p in problems(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)))]
    assert found == [], "result caches outside an app-owned cache:\n" + "\n".join(found)


def test_registries_are_filled_only_at_import() -> None:
    """Every call of a registry's filling function is a top-level statement of some module."""
    fillers = {filler for filler, _ in ALLOWED_REGISTRIES.values()}
    calls, top_level = 0, 0
    for file in sorted((ROOT / "app").rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        names = {id(n.value) for n in tree.body if isinstance(n, ast.Expr)}
        for node in ast.walk(tree):
            func = node.func if isinstance(node, ast.Call) else None
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in fillers:
                calls += 1
                top_level += id(node) in names
    assert calls >= 4 and calls == top_level, f"{calls - top_level} calls of {fillers} run after import"


@pytest.mark.parametrize(
    "source",
    [
        "import functools\n@functools.lru_cache(maxsize=8)\ndef f(x): return x\n",
        "from functools import cache\nclass A:\n    @cache\n    def f(self): return 1\n",
        "import functools\ndef g(x): return x\nf = functools.lru_cache(maxsize=None)(g)\n",
        "_SEEN = {}\ndef f(k):\n    if k not in _SEEN:\n        _SEEN[k] = k * 2\n    return _SEEN[k]\n",
        "from collections import OrderedDict\nMEMO = OrderedDict()\ndef f(k):\n    return MEMO.setdefault(k, k)\n",
        "RESULTS: list[int] = []\ndef f(k):\n    RESULTS.append(k)\n",
        "class A:\n    memo = {}\n    def f(self, k):\n        self.memo[k] = k\n",
        "VALUE = None\ndef f():\n    global VALUE\n    VALUE = 1\n",
    ],
)
def test_the_scan_finds_each_kind_of_cache(source: str) -> None:
    assert problems(source, "sample.py")


@pytest.mark.parametrize(
    "source",
    [
        "TABLE = {'a': 1}\ndef f(k):\n    return TABLE[k]\n",  # read, never written
        "class A:\n    def __init__(self):\n        self.items = {}\n"
        "    def put(self, k):\n        self.items[k] = k\n",  # the instance's own
        "def f(xs):\n    seen = {}\n    for x in xs:\n        seen[x] = 1\n    return seen\n",  # a per-call memo
        "import functools\nclass A:\n    @functools.cached_property\n    def f(self): return 1\n",  # per instance
    ],
)
def test_the_scan_lets_tables_and_owned_caches_be(source: str) -> None:
    assert problems(source, "sample.py") == []


def _deeply_immutable(value: object) -> bool:
    if value is None or isinstance(value, (str, bytes, int, float, bool, frozenset)):
        return True
    if isinstance(value, tuple):
        return all(_deeply_immutable(v) for v in value)
    if isinstance(value, MappingProxyType):
        return all(_deeply_immutable(k) and _deeply_immutable(v) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        params = getattr(type(value), "__dataclass_params__", None)
        return bool(params and params.frozen) and all(
            _deeply_immutable(getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


@pytest.mark.parametrize("name", sorted(ALLOWED_TABLES))
def test_each_allowed_table_is_an_immutable_value(name: str) -> None:
    module, attr = name.split(":")
    value = getattr(importlib.import_module(module), attr)
    assert _deeply_immutable(value), f"{name} must be a tuple / frozen mapping all the way down"
    assert value, f"{name} is empty"


def test_the_immutability_check_can_fail() -> None:
    assert not _deeply_immutable(({"a": 1},))
    assert not _deeply_immutable(MappingProxyType({"a": [1]}))
    assert _deeply_immutable(MappingProxyType({"a": (1, "b")}))

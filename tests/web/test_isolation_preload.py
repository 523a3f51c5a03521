"""The import child's forkserver preloads modules that exist, among them the one whose function
the import runs (`imports.read_log`): multiprocessing skips a preload name that fails to import
silently, and the child then imports the planner on every import (0.6 s of CPU each)."""

from __future__ import annotations

import importlib

from app.services import imports
from app.web.isolation import PRELOAD


def test_every_preloaded_module_imports() -> None:
    for name in PRELOAD:
        importlib.import_module(name)


def test_the_import_function_is_preloaded() -> None:
    assert imports.read_log.__module__ in PRELOAD

"""Helpers shared by the web tests (imported relatively: `from .support import ...`)."""

from __future__ import annotations

import warnings

from app.settings import Settings

with warnings.catch_warnings():
    # starlette's TestClient warns that plain httpx is deprecated in favour of httpx2, which is
    # not a dependency here; the warning is about the transport package, not about our code.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient` is deprecated")
    from fastapi.testclient import TestClient

__all__ = ["HX", "TestClient", "make_settings"]

HX = {"HX-Request": "true"}


def make_settings(**overrides: object) -> Settings:
    values: dict[str, object] = {"database_url": "sqlite://", "demo_data": True}
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]

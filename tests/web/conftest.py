"""Fixtures for the web tests: a fresh app per test, a test client, and the render log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI

from app.web.app import create_app
from app.web.templating import RenderEvent

from .support import TestClient, make_settings


@pytest.fixture
def app() -> FastAPI:
    return create_app(make_settings())


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=True) as test_client:
        yield test_client


@pytest.fixture
def renders(app: FastAPI) -> list[RenderEvent]:
    """Every template render of the test, in order (template, block, context)."""
    events: list[RenderEvent] = []
    app.state.templates.listeners.append(events.append)
    return events

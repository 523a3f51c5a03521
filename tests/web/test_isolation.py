"""Heavy work in a bounded child process (issue 12 item 1): results, errors, the time limit,
the memory cap, the concurrency bound and shutdown."""

from __future__ import annotations

import threading

import pytest
from starlette.exceptions import HTTPException

from app.core.errors import InputError
from app.web.isolation import Isolation
from tests.web import isolated_funcs as f


@pytest.fixture
def iso() -> Isolation:
    return Isolation(workers=1, time_limit_s=3.0, memory_bytes=1024**3, inline_below_chars=0)


def test_result_and_input_errors_come_back(iso: Isolation) -> None:
    assert iso.run("log", f.double, 21) == 42
    with pytest.raises(InputError) as info:
        iso.run("log", f.refuse, "runs[0]")
    assert (info.value.field, info.value.message) == ("runs[0]", "no good")


def test_past_the_time_limit_the_child_is_killed_and_the_field_named() -> None:
    iso = Isolation(workers=1, time_limit_s=0.5, inline_below_chars=0)
    with pytest.raises(InputError) as info:
        iso.run("log", f.spin, 60.0)
    assert info.value.field == "log"
    assert "0.5 s" in info.value.message
    assert not iso._live  # the child is gone


def test_a_memory_hog_is_an_input_error(iso: Isolation) -> None:
    with pytest.raises(InputError) as info:
        iso.run("log", f.hog)
    assert info.value.field == "log"
    assert "memory" in info.value.message


def test_at_most_workers_at_once_and_shutdown_kills_live_children() -> None:
    iso = Isolation(workers=1, time_limit_s=30.0, inline_below_chars=0)
    errors: list[BaseException] = []

    def long_one() -> None:
        try:
            iso.run("log", f.spin, 60.0)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=long_one)
    worker.start()
    while not iso._live:  # wait for the child to exist (a condition, not a sleep)
        threading.Event().wait(0.02)
    busy = Isolation.__new__(Isolation)  # the same slots, a short patience
    busy.__dict__.update(iso.__dict__, time_limit_s=0.2)
    with pytest.raises(HTTPException) as info:
        busy.run("log", f.double, 1)
    assert info.value.status_code == 503
    iso.shutdown()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert errors and isinstance(errors[0], HTTPException) and errors[0].status_code == 503
    with pytest.raises(HTTPException):
        iso.run("log", f.double, 1)

"""Heavy work in a bounded child process (issue 12 item 1): results, errors, the time limit,
the memory cap, the concurrency bound and shutdown."""

from __future__ import annotations

import threading

import pytest
from starlette.exceptions import HTTPException

from app.core.errors import InputError
from app.web import isolation
from app.web.isolation import Isolation
from tests.web import isolated_funcs as f


@pytest.fixture
def iso() -> Isolation:
    return Isolation(workers=1, cpu_limit_s=3.0, memory_bytes=1024**3, inline_below_chars=0)


def test_result_and_input_errors_come_back(iso: Isolation) -> None:
    assert iso.run("log", f.double, 21) == 42
    with pytest.raises(InputError) as info:
        iso.run("log", f.refuse, "runs[0]")
    assert (info.value.field, info.value.message) == ("runs[0]", "no good")


def test_past_the_time_limit_the_child_is_killed_and_the_field_named() -> None:
    iso = Isolation(workers=1, cpu_limit_s=0.5, inline_below_chars=0)
    with pytest.raises(InputError) as info:
        iso.run("log", f.spin, 60.0)
    assert info.value.field == "log"
    assert "0.5 s of processor time" in info.value.message
    assert not iso._live  # the child is gone


def test_waiting_is_not_working_the_cpu_limit_counts_cpu_seconds_only() -> None:
    """A child that waits (for a core, on a loaded machine) past its CPU allowance is not stopped
    for that: the CPU limit counts the child's own processor time."""
    iso = Isolation(workers=1, cpu_limit_s=0.3, inline_below_chars=0)
    assert iso.run("log", f.nap, 1.0) == 1.0


def test_the_wall_limit_stops_a_child_that_never_finishes() -> None:
    iso = Isolation(workers=1, cpu_limit_s=30.0, wall_limit_s=0.5, inline_below_chars=0)
    iso.wall_limit_s = 0.5  # below the CPU limit only in this test (the constructor keeps wall >= cpu)
    with pytest.raises(InputError) as info:
        iso.run("log", f.nap, 60.0)
    assert "did not finish within the 0.5 s" in info.value.message
    assert not iso._live


def test_the_kernel_stops_a_child_past_its_cpu_limit_when_the_parent_cannot_measure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without /proc (the parent reads nothing), RLIMIT_CPU in the child is the stop: SIGXCPU
    one whole second past the limit, reported as the same CPU-time message."""
    monkeypatch.setattr(isolation, "cpu_seconds", lambda pid: None)
    iso = Isolation(workers=1, cpu_limit_s=0.2, inline_below_chars=0)
    with pytest.raises(InputError) as info:
        iso.run("log", f.spin_ignoring_checks, 60.0)
    assert "0.2 s of processor time" in info.value.message
    assert not iso._live


def test_cpu_seconds_reads_this_process() -> None:
    import os
    import time

    used = isolation.cpu_seconds(os.getpid())
    assert used is not None
    assert abs(used - time.process_time()) < 0.5  # the same clock as the kernel's, in ticks
    assert isolation.cpu_seconds(2**22 + 12345) is None  # no such process


def test_a_memory_hog_is_an_input_error(iso: Isolation) -> None:
    with pytest.raises(InputError) as info:
        iso.run("log", f.hog)
    assert info.value.field == "log"
    assert "memory" in info.value.message


def test_at_most_workers_at_once_and_shutdown_kills_live_children() -> None:
    iso = Isolation(workers=1, cpu_limit_s=30.0, inline_below_chars=0)
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
    busy.__dict__.update(iso.__dict__, cpu_limit_s=0.2)
    with pytest.raises(HTTPException) as info:
        busy.run("log", f.double, 1)
    assert info.value.status_code == 503
    iso.shutdown()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert errors and isinstance(errors[0], HTTPException) and errors[0].status_code == 503
    with pytest.raises(HTTPException):
        iso.run("log", f.double, 1)

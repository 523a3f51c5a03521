"""Module-level functions the isolation tests run in child processes (they must pickle)."""

from __future__ import annotations

import time

from app.core.errors import InputError


def double(x: int) -> int:
    return 2 * x


def spin(seconds: float) -> int:
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


def refuse(field: str) -> None:
    raise InputError(field, "no good")


def hog() -> int:
    blob = bytearray(8 * 1024**3)  # over the child's address-space cap
    return len(blob)


def nap(seconds: float) -> float:
    """Wall time without CPU time (a child waiting for a core looks like this to its limits)."""
    time.sleep(seconds)
    return seconds


def spin_ignoring_checks(seconds: float) -> int:
    """CPU time the parent cannot see: its /proc reading is disabled by the test, so only the
    child's own RLIMIT_CPU stops this."""
    return spin(seconds)

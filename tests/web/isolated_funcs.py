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

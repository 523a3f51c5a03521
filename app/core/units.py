"""Byte quantities: parse sizes written by people or printed by tools, format them for display.

Bytes are integers everywhere inside the core. Decimal units (kB, MB, GB, TB) are powers of
1000 and binary units (KiB, MiB, GiB, TiB) powers of 1024; "GB" means 10**9 here. (Old vLLM log
lines print "GB" for bytes / 2**30: the log parser handles that case itself.)
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

from app.core.errors import InputError

KIB = 1024
MIB = 1024**2
GIB = 1024**3
TIB = 1024**4

_UNITS: dict[str, int] = {
    "b": 1,
    "": 1,
    "byte": 1,
    "bytes": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": KIB,
    "mib": MIB,
    "gib": GIB,
    "tib": TIB,
    "ki": KIB,
    "mi": MIB,
    "gi": GIB,
    "ti": TIB,
}

@functools.lru_cache(maxsize=1024)
def decimal_ratio(value: float) -> tuple[int, int]:
    """A float as the exact decimal fraction its shortest repr writes (0.9 → (9, 10), not 0.9's
    binary value): the value the user typed, with no float noise. Memoised: sliders repeat values."""
    return Fraction(repr(value)).as_integer_ratio()


_SIZE = re.compile(r"^\s*([+-]?(?:\d[\d_,]*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(value: object, field: str = "value") -> int:
    """Parse an integer byte count or a string with a unit ("80 GiB", "16.06 GB", "1e9 B").

    Rounds to the nearest byte. Refuses negatives, NaN/inf, booleans and unknown units with
    an InputError naming the field and the value.
    """
    if isinstance(value, bool):
        raise InputError(field, f"expected a size in bytes or a string such as '80 GiB', got {value!r}")
    if isinstance(value, int):
        number: float | int = value
        scale = 1
    elif isinstance(value, float):
        number, scale = value, 1
    elif isinstance(value, str):
        match = _SIZE.match(value)
        if match is None:
            if re.search(r"nan|inf", value, re.IGNORECASE):
                raise InputError(field, f"size must be a finite number, got {value!r}")
            raise InputError(field, f"cannot read {value!r} as a size (examples: 80 GiB, 16.06 GB, 512 MiB)")
        unit = match.group(2).lower()
        if unit not in _UNITS:
            raise InputError(
                field, f"unknown unit {match.group(2)!r} in {value!r} (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
            )
        scale = _UNITS[unit]
        number = float(match.group(1).replace(",", "").replace("_", ""))
    else:
        raise InputError(field, f"expected a size in bytes or a string such as '80 GiB', got {value!r}")
    if isinstance(number, float) and not math.isfinite(number):
        raise InputError(field, f"size must be a finite number, got {value!r}")
    if number < 0:
        raise InputError(field, f"size must not be negative, got {value!r}")
    if isinstance(number, int):
        return number * scale
    return round(number * scale)


def gib(n_bytes: int | float) -> float:
    """Bytes as GiB (for display only)."""
    return n_bytes / GIB


def fmt_bytes(n_bytes: int | None) -> str:
    """A short human string: '44.00 GiB', '640.0 MiB', '131,072 B'."""
    if n_bytes is None:
        return "unknown"
    size = abs(n_bytes)
    sign = "-" if n_bytes < 0 else ""
    if size >= GIB:
        return f"{sign}{size / GIB:.2f} GiB"
    if size >= MIB:
        return f"{sign}{size / MIB:.1f} MiB"
    if size >= KIB:
        return f"{sign}{size / KIB:.1f} KiB"
    return f"{sign}{size:,} B"

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
PIB = 1024**5

#: The largest byte count any size field takes (4 PiB: far above any GPU, node or cluster
#: figure, far below where float arithmetic loses whole bytes or overflows).
MAX_BYTES = 4 * PIB
#: The most characters a size string may have (digits, separators, exponent, unit).
MAX_SIZE_CHARS = 64

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
    "p": 1000**5,
    "pb": 1000**5,
    "pib": PIB,
    "pi": PIB,
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
        raise InputError(field, f"expected a size in bytes or a string such as '80 GiB', got {_short(value)}")
    if isinstance(value, int):
        number: float | int = value
        scale = 1
    elif isinstance(value, float):
        number, scale = value, 1
    elif isinstance(value, str):
        if len(value) > MAX_SIZE_CHARS:
            raise InputError(field, f"a size is at most {MAX_SIZE_CHARS} characters (got {len(value):,})")
        match = _SIZE.match(value)
        if match is None:
            if re.search(r"nan|inf", value, re.IGNORECASE):
                raise InputError(field, f"size must be a finite number, got {_short(value)}")
            raise InputError(field, f"cannot read {_short(value)} as a size (examples: 80 GiB, 16.06 GB, 512 MiB)")
        unit = match.group(2).lower()
        if unit not in _UNITS:
            raise InputError(
                field,
                f"unknown unit {match.group(2)!r} in {_short(value)} "
                "(use B, KiB, MiB, GiB, TiB, PiB, kB, MB, GB, TB, PB)",
            )
        scale = _UNITS[unit]
        number = float(match.group(1).replace(",", "").replace("_", ""))
    else:
        raise InputError(field, f"expected a size in bytes or a string such as '80 GiB', got {_short(value)}")
    if isinstance(number, float) and not math.isfinite(number):
        raise InputError(field, f"size must be a finite number, got {_short(value)}")
    if number < 0:
        raise InputError(field, f"size must not be negative, got {_short(value)}")
    # Compared before multiplying or rounding: 1e308 TiB overflows a float, 10**1000 is exact.
    if number > MAX_BYTES // scale:
        raise InputError(field, f"size must be at most 4 PiB ({MAX_BYTES:,} bytes), got {_short(value)}")
    if isinstance(number, int):
        return number * scale
    return round(number * scale)


def _short(value: object) -> str:
    """A value for an error message: huge integers by their digit count, not their digits."""
    if isinstance(value, int) and abs(value) >= 10**30:  # str() of > 4,300 digits raises
        return f"an integer of about {int(abs(value).bit_length() * math.log10(2)) + 1} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


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

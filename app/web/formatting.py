"""Display formatting for templates: bytes in GiB/MiB, thousands separators, ratios.

Bytes are integers everywhere else; GiB appear only here, at the edge.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

GIB = 1024**3
MIB = 1024**2


def gib(value: object, digits: int = 2) -> str:
    """Bytes as GiB with a fixed number of decimals ("44.00 GiB"); "—" for missing values (a
    page formats at most a few hundred: the rank table shows at most `charts.MAX_BARS` rows)."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value / GIB:,.{digits}f} GiB"


def size(value: object) -> str:
    """Bytes in the unit that reads best: GiB above 1 GiB, MiB above 1 MiB, KiB, else bytes."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    magnitude = abs(value)
    if magnitude >= GIB:
        return f"{value / GIB:,.2f} GiB"
    if magnitude >= MIB:
        return f"{value / MIB:,.1f} MiB"
    if magnitude >= 1024:
        return f"{value / 1024:,.1f} KiB"
    return f"{value:,} B" if isinstance(value, int) else f"{value:,.0f} B"


def intcomma(value: object) -> str:
    """Integers with thousands separators; floats with up to two decimals; "—" when missing."""
    if value is None or isinstance(value, bool):
        return "—" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{int(value):,}"
    return str(value)


def signed(value: object, formatter: str = "int") -> str:
    """A delta with its sign: "+2,048", "−1.50 GiB", "0"."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    if value == 0:
        return "0"
    body = {"gib": gib, "size": size}.get(formatter, intcomma)(abs(value))
    return ("+" if value > 0 else "−") + body


def percent(value: object, digits: int = 0) -> str:
    """A fraction as a percentage ("0.08" → "8%")."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value * 100:.{digits}f}%"


def ratio(value: object, digits: int = 3) -> str:
    """A plain ratio with fixed decimals ("0.745"); "—" when missing."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "—"
    return f"{value:.{digits}f}"


def humanize(name: object) -> str:
    """A snake_case key as words ("max_num_seqs" → "max num seqs")."""
    return str(name).replace("_", " ")


FILTERS: dict[str, Callable[..., Any]] = {
    "gib": gib,
    "size": size,
    "intcomma": intcomma,
    "signed": signed,
    "percent": percent,
    "ratio": ratio,
    "humanize": humanize,
}

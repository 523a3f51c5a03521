from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.errors import InputError
from app.core.units import GIB, MIB, fmt_bytes, parse_bytes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80 GiB", 80 * 2**30),
        ("16.06 GB", 16_060_000_000),
        ("512 MiB", 512 * 2**20),
        ("3.5 TiB", 3_848_290_697_216),
        ("1e9 B", 1_000_000_000),
        ("1,024", 1024),
        ("0.9GiB", 966_367_642),
        (131072, 131072),
        (1.6, 2),
    ],
)
def test_parse(text: object, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("-1 GiB", "negative"),
        ("nan", "finite"),
        ("inf GiB", "finite"),
        ("1e999 GB", "finite"),
        ("12 furlongs", "unknown unit 'furlongs'"),
        ("", "cannot read"),
        (True, "expected a size"),
        ([1], "expected a size"),
        (-5, "negative"),
        (float("nan"), "finite"),
    ],
)
def test_reject(value: object, needle: str) -> None:
    with pytest.raises(InputError) as err:
        parse_bytes(value, "ranks[3].total")
    assert err.value.field == "ranks[3].total"
    assert needle in err.value.message
    assert repr(value) in err.value.message or str(value) in err.value.message


@given(st.integers(min_value=0, max_value=2**50))
def test_integers_round_trip(n: int) -> None:
    assert parse_bytes(n) == n
    assert parse_bytes(f"{n} B") == n
    assert parse_bytes(f"{n / GIB!r} GiB") == n


def test_fmt() -> None:
    assert fmt_bytes(44 * GIB) == "44.00 GiB"
    assert fmt_bytes(640 * MIB) == "640.0 MiB"
    assert fmt_bytes(-GIB) == "-1.00 GiB"
    assert fmt_bytes(None) == "unknown"

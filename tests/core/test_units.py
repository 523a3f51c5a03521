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


# --- the stated range (issue 12 item 2, issue 17 item 13): 0 ≤ bytes ≤ 4 PiB ---------------------

from app.core.units import MAX_BYTES, PIB  # noqa: E402


@pytest.mark.parametrize(
    "value",
    [10**1000, 10**5000, 1e308, "1e308 GiB", "1e300 TiB", "1e30GiB", MAX_BYTES + 1, "4097 TiB", "5 PiB",
     "9" * 400, "1" * 65],
    ids=lambda v: type(v).__name__,
)
def test_absurd_sizes_are_refused_naming_the_field(value: object) -> None:
    with pytest.raises(InputError) as info:
        parse_bytes(value, "ranks[0].total")
    assert info.value.field == "ranks[0].total"
    assert len(info.value.message) < 200  # never echoes hundreds of digits


def test_the_range_ends_are_accepted() -> None:
    assert parse_bytes("4 PiB") == MAX_BYTES == 4 * PIB
    assert parse_bytes(MAX_BYTES) == MAX_BYTES
    assert parse_bytes("4096 TiB") == MAX_BYTES
    assert parse_bytes("1 PB") == 10**15
    assert parse_bytes(0) == 0


@given(st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                 st.from_regex(r"\A[0-9.eE+-]{1,30} ?(GiB|TiB|PB|B|)\Z")))
def test_every_value_is_in_range_or_an_input_error(value: object) -> None:
    try:
        n = parse_bytes(value, "x")
    except InputError as exc:
        assert exc.field == "x"
    else:
        assert 0 <= n <= MAX_BYTES

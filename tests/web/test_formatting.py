"""Display formatting: the GiB text equals the plain formula."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.web.formatting import gib, intcomma, ratio, signed


def plain_gib(value: int | float, digits: int = 2) -> str:
    return f"{value / 1024**3:,.{digits}f} GiB"


@given(st.lists(st.integers(-(2**50), 2**50), min_size=1, max_size=50))
def test_gib_equals_the_formula(values: list[int]) -> None:
    for value in values:
        assert gib(value) == plain_gib(value)


def test_gib_other_inputs() -> None:
    assert gib(44 * 2**30) == "44.00 GiB"
    assert gib(1.5 * 2**30) == "1.50 GiB"
    assert gib(3 * 2**30, 1) == "3.0 GiB"
    assert gib(None) == gib(True) == gib("12") == "—"


def test_other_formatters() -> None:
    assert intcomma(1234567) == "1,234,567"
    assert intcomma(2.5) == "2.5" and intcomma(3.0) == "3"
    assert ratio(0.74512) == "0.745"
    assert signed(-2048) == "−2,048" and signed(0) == "0" and signed(2**30, "gib") == "+1.00 GiB"

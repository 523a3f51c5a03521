"""The fast path (one needle alternation per distinct line, what a line does replayed from a cache
keyed by its text) gives exactly what the slow reading gives: tests/ingest/reference_vllm_log.py
reads every line and runs every extractor whose needles the line holds, with no prefilter and no
cache. Differential over every real log of tests/data/vllm-logs (whatever is added there), their
concatenations (the same lines repeated across logs and runs) and real lines shuffled, repeated,
coloured and cut (hypothesis)."""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.ingest.vllm_log import log_parse_to_json, parse_vllm_log

from . import reference_vllm_log as reference
from .ingest_helpers import LOGS, read, retimed, shifted

ALL_LOGS: list[Path] = sorted(LOGS.rglob("*.log"))


def fast(text: str) -> dict[str, object]:
    return log_parse_to_json(parse_vllm_log(text))


def slow(text: str) -> dict[str, object]:
    return log_parse_to_json(reference.parse_vllm_log(text))


@cache
def _text(path: Path) -> str:
    return read(path)


def test_there_are_real_logs() -> None:
    assert len(ALL_LOGS) >= 50  # the differential below must not pass on an empty glob


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: str(p.relative_to(LOGS)))
def test_each_real_log_as_the_slow_reading(path: Path) -> None:
    assert fast(_text(path)) == slow(_text(path))


def test_real_logs_concatenated_and_repeated() -> None:
    """The benchmark's input in small: every log once, then the whole again (every line a cache
    hit the second time, under other line numbers and after other runs)."""
    one = "".join(t if t.endswith("\n") else t + "\n" for t in map(_text, ALL_LOGS))
    assert fast(one * 2) == slow(one * 2)


def test_real_logs_in_another_order_without_trailing_newlines() -> None:
    texts = [_text(p).rstrip("\n") for p in ALL_LOGS]
    random.Random(7).shuffle(texts)
    glued = "\n".join(texts)
    assert fast(glued) == slow(glued)


def test_the_prefilter_reads_a_wrapped_graph_capture_line() -> None:
    """The one place the old keyword table differed from the needles: 'Graph capturing finished in'
    wrapped before its 'took', now read (joined with its continuation line)."""
    doc = fast(_text(LOGS / "extra" / "hard-wrapped-words100.log"))
    rank = next(r for r in doc["runs"][0]["ranks"] if r["rank"] == "TP0_EP0")  # type: ignore[index]
    assert rank["graph_capture_seconds"] == 53.0
    assert rank["evidence"]["cuda_graph_bytes"]["printed"] == "3.45 GiB"


REAL_LINES: list[str] = sorted({line for p in ALL_LOGS for line in _text(p).splitlines() if line.strip()})
_COLOURS = ("", "\x1b[1;36m", "\x1b[0;0m", "^[[32m", "\x1b[32m", "^[[0m")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(REAL_LINES),
            st.integers(1, 3),  # times the line repeats (a cache hit after the first)
            st.sampled_from(_COLOURS),
            st.sampled_from(["\n", "\r\n", "\r", "\n\n"]),
            st.integers(0, 60),  # characters cut from the front (a prefix cut short)
        ),
        min_size=1,
        max_size=60,
    )
)
def test_real_lines_shuffled_repeated_coloured_cut(pieces: list[tuple[str, int, str, str, int]]) -> None:
    text = "".join((colour + line[cut:] + sep) * times for line, times, colour, sep, cut in pieces)
    assert fast(text) == slow(text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(ALL_LOGS), st.integers(0, 200), st.booleans()), min_size=1, max_size=5))
def test_real_logs_concatenated_with_shifted_times_and_pids(pieces: list[tuple[Path, int, bool]]) -> None:
    """Whole real logs in any order, each as a later restart prints it (header times and pids
    shifted: no line repeats an earlier one's text), some without their last newline."""
    text = "".join(shifted(_text(path), k) + ("\n" if newline else "") for path, k, newline in pieces)
    assert fast(text) == slow(text)


def test_the_benchmarks_shifted_input_in_small() -> None:
    """Every real log once, then every one again as a later restart (the benchmark's shifted row)."""
    one = "".join(t if t.endswith("\n") else t + "\n" for t in map(_text, ALL_LOGS))
    text = one + shifted(one, 1)
    assert text != one * 2
    assert fast(text) == slow(text)


def test_the_benchmarks_retimed_input_in_small() -> None:
    """Every real log once, then again as a later restart that took other times (durations changed
    too: the benchmark's third input), then as a third restart: template keys hit and miss."""
    one = "".join(t if t.endswith("\n") else t + "\n" for t in map(_text, ALL_LOGS))
    text = one + retimed(one, 1) + shifted(one, 2)
    assert retimed(one, 1) != shifted(one, 1)
    assert fast(text) == slow(text)

"""The header time and the record header are found from the right (`last_header`: one `rfind`
per level word) exactly where the regex run at every position of the window finds its last match:
random windows over real log lines, and generated text dense in level words, digits and glued
headers (`INFOINFO 01-02 …`, `ERROR ERROR 12-31 …`, a header cut by the window's end)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.ingest import vllm_log_prefix, vllm_log_templates
from app.ingest.vllm_log_prefix import last_header

from .ingest_helpers import LOGS, read

PATTERNS = (vllm_log_templates._STAMP, vllm_log_prefix._LEVEL)
LINES = sorted({ln for p in LOGS.rglob("*.log") for ln in read(p).splitlines() if "pid=" in ln or " 0" in ln})
PIECES = ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ", "INFO", "12-31 ", "01-02 ", "23:59:59", "0", "1", " ",
          "-", ":", "(Worker pid=1) ", "NFO ", "WARN ")


def by_regex(pattern: re.Pattern[str], seg: str, floor: int, end: int) -> tuple[int, int] | None:
    found = list(pattern.finditer(seg, floor, end))
    return found[-1].span() if found else None


def by_rfind(pattern: re.Pattern[str], seg: str, floor: int, end: int) -> tuple[int, int] | None:
    m = last_header(pattern, seg, floor, end)
    return None if m is None else m.span()


def test_every_real_line_at_every_end() -> None:
    checked = 0
    for line in LINES[:400]:
        for end in range(0, len(line) + 1, 7):
            for pattern in PATTERNS:
                floor = max(0, end - 300)
                assert by_rfind(pattern, line, floor, end) == by_regex(pattern, line, floor, end), (line, end)
                checked += 1
    assert checked > 1000


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), max_size=40), st.integers(0, 400), st.integers(0, 400))
def test_generated_windows(pieces: list[str], a: int, b: int) -> None:
    seg = "".join(pieces)
    floor, end = min(a, b, len(seg)), min(max(a, b), len(seg))
    for pattern in PATTERNS:
        assert by_rfind(pattern, seg, floor, end) == by_regex(pattern, seg, floor, end)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(LINES), st.integers(0, 500))
def test_the_header_time_of_real_lines(line: str, pos: int) -> None:
    pos = min(pos, len(line))
    found = list(vllm_log_templates._STAMP.finditer(line, max(0, pos - 300), pos + 1))
    want = tuple(int(x) for x in found[-1].groups()) if found else None
    assert vllm_log_templates._stamp(line, pos) == want

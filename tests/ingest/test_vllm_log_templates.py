"""The template path of the line scan (`vllm_log.template_key`): a line that starts with a record
header is also keyed with its header's pids and time masked, and a line of a known key states the
facts of the first line of that key, with who printed them and when read from the line itself.
Checked line by line against `line_ops` on every real line printed as a later restart, and on
the cases that must not share a key. (The whole-parse differential with shifted restarts is in
test_vllm_log_fast_path.py.)"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from app.ingest.vllm_log import _fresh_ops, line_ops
from app.ingest.vllm_log_lines import Fact
from app.ingest.vllm_log_templates import _GROUP, Op, _template, template_key

from .ingest_helpers import LOGS, read, shifted

ALL_LOGS: list[Path] = sorted(LOGS.rglob("*.log"))
LINE = ("(EngineCore_DP0 pid=1944) (Worker_TP1 pid=2081) INFO 09-24 20:52:10.123 [gpu_worker.py:467] "
        "Available KV cache memory: 20.61 GiB")


@cache
def _lines() -> list[str]:
    out: list[str] = []
    for path in ALL_LOGS:
        out.extend(dict.fromkeys(read(path).split("\n")))
    return out


def test_the_key_masks_only_the_headers_pids_and_time() -> None:
    keyed = template_key(LINE)
    assert keyed is not None
    key, end = keyed
    assert len(key) == len(LINE)
    assert key == ("(EngineCore_DP0 pid=####) (Worker_TP1 pid=####) INFO ################## [gpu_worker.py:467] "
                   "Available KV cache memory: 20.61 GiB")
    assert LINE[end:] == "Available KV cache memory: 20.61 GiB"
    later = LINE.replace("1944", "5012").replace("2081", "5149").replace("09-24 20:52:10.123", "09-25 03:01:59.9")
    assert template_key(later) == (key.replace("#" * 18, "#" * 16), end - 2)  # fewer time digits: another key
    restart = LINE.replace("1944", "5012").replace("2081", "5149").replace("09-24 20:52:10", "09-25 03:01:59")
    assert template_key(restart) == keyed  # a later restart with pids of the same length: the same key


@pytest.mark.parametrize("other", [
    LINE.replace("20.61", "20.62"),  # another figure in the message
    LINE.replace("pid=2081", "pid=20810"),  # a longer pid: positions move, another key
    LINE.replace("TP1", "TP2"),  # another worker
    LINE.replace("gpu_worker.py:467", "gpu_worker.py:468"),  # another source line
    LINE.replace("INFO", "DEBUG"),
])
def test_lines_that_differ_elsewhere_have_other_keys(other: str) -> None:
    assert template_key(other) is not None
    assert template_key(other) != template_key(LINE)


@pytest.mark.parametrize("line", [
    "Available KV cache memory: 20.61 GiB",  # no header
    LINE + "\r" + LINE,  # pieces: the line path
    "\x1b[0;36m" + LINE,
    "^[[0;36m" + LINE,
    "INFO 09-24 20:52:10 Available KV cache memory: 20.61 GiB",  # no [file.py:N]
])
def test_lines_without_a_plain_header_take_the_line_path(line: str) -> None:
    assert template_key(line) is None
    assert _fresh_ops(line, {}) == line_ops(line)


def test_a_match_inside_the_header_is_not_a_template() -> None:
    fact = Fact("rank", "kv_bytes", 1, pos=3)
    assert _template(((_GROUP, [fact], None, None),), LINE, 10) is None
    made = _template(((_GROUP, [fact._replace(pos=10)], None, None),), LINE, 10)
    assert made is not None and made[0][1] == [fact._replace(pos=10)]
    templates: dict[str, tuple[Op, ...]] = {}
    _fresh_ops(LINE, templates)
    assert len(templates) == 1


def test_a_header_with_a_hash_of_its_own_takes_the_line_path() -> None:
    """`pid=#` would share the key of a real pid's line: such a header is not keyed."""
    odd = LINE.replace("pid=2081", "pid=#")
    assert template_key(odd) is None
    assert _fresh_ops(odd, {}) == line_ops(odd)


@pytest.mark.parametrize("k", [1, 37])
def test_every_real_line_as_a_later_restart_states_what_it_states(k: int) -> None:
    """Templates learnt from every real line, then every line of a later restart read through
    them: the ops `line_ops` gives that line itself (facts, identity, time, joins, repeats)."""
    lines = _lines()
    assert len(lines) > 1000
    templates: dict[str, tuple[Op, ...]] = {}
    for line in lines:
        assert _fresh_ops(line, templates) == line_ops(line)
    hits = 0
    for line in lines:
        later = shifted(line, k)
        keyed = template_key(later)
        hits += keyed is not None and keyed[0] in templates
        assert _fresh_ops(later, templates) == line_ops(later)
    assert hits > len(lines) // 4  # the template path was walked, not only the line path

"""Two steps of the line scan (`vllm_log`) that a line's digits do not decide: the operations a
line performs on the run builder, and the template key under which a later restart's line reuses
the facts of an earlier one (pids and header time masked), with the header time read from a line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from app.ingest.vllm_log_prefix import identity_at, identity_span, last_header

# The operations a candidate line performs on the run builder, in text order, computed once per
# distinct line text (concatenated or repeated logs and TP ranks print the same lines verbatim):
# (_GROUP, facts, identity, stamp) | (_HEADER, piece, position) | (_REPEATED, (n, ...), emitted) |
# (_JOIN, piece, extractor index): the one context-dependent step, a message cut by a hard wrap.
_GROUP, _HEADER, _REPEATED, _JOIN = 0, 1, 2, 3
Op = tuple[Any, ...]


_STAMP = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def _stamp(seg: str, pos: int) -> tuple[int, int, int, int, int] | None:
    """The log header time (month, day, h, m, s) of the message at `pos`, if its header has one."""
    return _stamp_at(seg, _stamp_spans(seg, pos))


StampSpans = tuple[tuple[int, int], ...] | None


def _stamp_spans(seg: str, pos: int) -> StampSpans:
    """Where `_stamp` reads the five numbers (found by level words and digit positions alone)."""
    found = last_header(_STAMP, seg, max(0, pos - 300), pos + 1)
    return None if found is None else found.regs[1:6]


def _stamp_at(seg: str, spans: StampSpans) -> tuple[int, int, int, int, int] | None:
    if spans is None:
        return None
    (a, b), (c, d), (e, f), (g, h), (i, j) = spans
    return (int(seg[a:b]), int(seg[c:d]), int(seg[e:f]), int(seg[g:h]), int(seg[i:j]))


# A restart prints the lines of the one before with other pids and header times. A line that
# starts with a record header (process prefixes, `LEVEL MM-DD HH:MM:SS[.f] [file.py:N] `; ANSI gone)
# is also keyed with the pid digits and the time in that header masked (`#`, same length; a header
# holding a `#` of its own is not keyed): the lines of one key differ only in those digits, no
# needle holds a digit, and an extractor match that starts after the header reads only the
# message (each `_GROUP`'s position is checked), so such a line states the facts of the first
# line of its key. Who printed them and when are read from the line itself, at the places found
# in the first line (`identity_span`, `_stamp_spans`: found from letters and digit positions,
# never from a digit's value, so the same in every line of the key). Measured: bench_parser.py.
_LEAD = re.compile(
    r"(?:\([^()]{0,120}\) ?){0,4}(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})?) "
    r"\[?[\w./\-]{1,120}:\d{1,6}\] "
)
_DIGITS = "0123456789"


def _mask_pids(prefixes: str) -> str:
    """`prefixes` with the digits after each `pid=` masked (same length)."""
    pieces = prefixes.split("pid=")
    out = [pieces[0]]
    for piece in pieces[1:]:
        rest = piece.lstrip(_DIGITS)
        out.append("#" * (len(piece) - len(rest)) + rest)
    return "pid=".join(out)


def template_key(raw: str) -> tuple[str, int] | None:
    """`raw` with its header's pids and time masked, and where its header ends; None for a line
    without a leading record header, with a `#` in it, a `\\r` or a colour code (the line path)."""
    if "\r" in raw or "\x1b" in raw or "^[[" in raw:
        return None
    m = _LEAD.match(raw)
    if m is None:
        return None
    end = m.end()
    start, stop = m.span(1)  # the header time
    if "#" in raw[:end]:
        return None
    prefixes = raw[:start]
    if "pid=" in prefixes:
        prefixes = _mask_pids(prefixes)
    return prefixes + "#" * (stop - start) + raw[stop:], end


def _template(ops: tuple[Op, ...], raw: str, end: int) -> tuple[Op, ...] | None:
    """The ops of `raw` as a template for its key: each group with the places its identity and
    time are read from; None when a match starts inside the header (at or before `end`)."""
    out: list[Op] = []
    for op in ops:
        if op[0] == _GROUP:
            pos = op[1][0].pos
            if pos < end:
                return None
            out.append((_GROUP, op[1], identity_span(raw, pos), _stamp_spans(raw, pos)))
        else:
            out.append(op)
    return tuple(out)


def _instantiate(template: tuple[Op, ...], raw: str) -> tuple[Op, ...]:
    """The ops of `raw` from the template of its key: the same facts, the prefix identity and
    header time read from `raw` (it has no `\\r`: its one piece is itself)."""
    out: list[Op] = []
    for op in template:
        kind = op[0]
        if kind == _GROUP:
            out.append((_GROUP, op[1], identity_at(raw, op[2]), _stamp_at(raw, op[3])))
        elif kind == _REPEATED:
            out.append(op)
        else:  # _HEADER, _JOIN: (kind, piece, position | extractor index)
            out.append((kind, raw, op[2]))
    return tuple(out)


def fresh_ops(raw: str, templates: dict[str, tuple[Op, ...]], line_ops: Callable[[str], tuple[Op, ...]],
              limit: int) -> tuple[Op, ...]:
    """`line_ops(raw)` for a line text not seen before, through its template key when it has one."""
    keyed = template_key(raw)
    if keyed is None:
        return line_ops(raw)
    key, end = keyed
    template = templates.get(key)
    if template is not None:
        return _instantiate(template, raw)
    ops = line_ops(raw)
    if len(templates) < limit:
        made = _template(ops, raw, end)
        if made is not None:
            templates[key] = made
    return ops

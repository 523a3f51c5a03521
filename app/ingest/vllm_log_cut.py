"""A log that ends in the middle of a line: its last number may be cut short.

A paste or a `head -c` can stop inside the last line; when that line ends in a figure
(`… num_gpu_blocks is: 62` of `… is: 6297`, `Overriding num_gpu_blocks=… with
num_gpu_blocks_override=51` of `=512`) the digits read are a prefix of the ones printed: a wrong
number that looks right. Lines ending in a unit (`2.31 GiB`, `1.54x`, `… bytes.`) cannot be cut so
silently (the regexes need the unit). So when the text has no newline after its last line, that line
ends in digits, and those digits are what a figure of that line reads, the digits are dropped and a
finding says so; a complete last line pasted without its newline loses only that one figure, named.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from app.ingest.vllm_log_lines import Fact
from app.ingest.vllm_log_model import Finding
from app.ingest.vllm_log_templates import _GROUP, Op

_TRAILING_NUMBER = re.compile(r"\d[\d,.]*$")


def _figures(ops: Sequence[Op]) -> list[tuple[str, str, object]]:
    out: list[tuple[str, str, object]] = []
    for op in ops:
        if op[0] == _GROUP:
            facts: list[Fact] = op[1]
            out += [(f.scope, f.field, f.value) for f in facts]
    return out


def cut_last_number(text: str, line_ops: Callable[[str], Sequence[Op]]) -> tuple[str, Finding | None]:
    """`text` without the digits its unterminated last line ends in when they are a figure of
    that line, and the finding that says so; `text` unchanged (and None) otherwise."""
    if not text or text.endswith(("\n", "\r")):
        return text, None
    start = text.rfind("\n") + 1
    last = text[start:]
    m = _TRAILING_NUMBER.search(last)
    if m is None:
        return text, None
    kept = last[: m.start()]
    if _figures(line_ops(last)) == _figures(line_ops(kept)):
        return text, None  # the digits are no figure's: nothing read from them
    number = text.count("\n") + 1
    shown = last if len(last) <= 100 else "…" + last[-99:]
    message = (f"the text ends in the middle of line {number} (no newline after {shown!r}): its last number, "
               f"{m[0]}, may be cut short, so it is not read; paste the whole line, or the log with its last "
               "newline, to read it")
    return text[:start] + kept, Finding("last_line_cut", message, number, "warning", {"number": m[0]})

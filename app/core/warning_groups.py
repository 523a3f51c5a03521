"""Identical warnings across ranks, said once: "ranks TP0–TP7: will not fit …" (issue 17, item 14).

A warning belongs to a group when its code and its message are the same once its own rank's
label (in "rank <label>") is taken out. The plan's `warnings` list stays one entry per rank (the
JSON contract); `warning_groups` adds one entry per group with every rank it covers, and the
page and the CLI's text show the groups.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

JSON = dict[str, Any]
_NUMBERED = re.compile(r"^(.*?)(\d+)$")
_SHOWN = 4
#: Rank labels a group lists (`count` covers every rank; `ranks_omitted` the labels left out).
MAX_LABELS = 1024


def _template(message: str, rank: str | None) -> str:
    """The message with "rank <label>" (a word, followed by a space, ':', ',', ';', ')' or the end)
    as "rank {}". A plain scan, not a regex per label: a 100,000-rank plan has as many labels."""
    if not rank:
        return message
    needle, out, start = f"rank {rank}", [], 0
    while (i := message.find(needle, start)) != -1:
        end = i + len(needle)
        before_ok = i == 0 or not (message[i - 1].isalnum() or message[i - 1] == "_")
        after_ok = end == len(message) or message[end].isspace() or message[end] in ":,;)"
        out.append(message[start:i] + ("rank {}" if before_ok and after_ok else needle))
        start = end
    return "".join(out) + message[start:]


def rank_span(labels: Sequence[str]) -> str:
    """"TP0–TP7" for one prefix with consecutive numbers, else the labels (the first few, then a count)."""
    parts = [_NUMBERED.match(label) for label in labels]
    if len(labels) > 2 and all(parts):
        prefixes = {p[1] for p in parts if p}
        numbers = [int(p[2]) for p in parts if p]
        if len(prefixes) == 1 and numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{labels[0]}–{labels[-1]}"
    if len(labels) <= _SHOWN:
        return ", ".join(labels)
    return f"{', '.join(labels[:_SHOWN])}, … ({len(labels)} ranks)"


def _grouped_message(template: str, labels: list[str]) -> str:
    if len(labels) == 1:
        return template.replace("rank {}", f"rank {labels[0]}")
    span = f"ranks {rank_span(labels)}"
    for lead in ("rank {}: ", "rank {} "):
        if template.startswith(lead):
            return f"{span}: {template[len(lead):]}"
    return template.replace("rank {}", span)


def group_warnings(warnings: Iterable[Mapping[str, Any]]) -> list[JSON]:
    """One entry per distinct (code, message without its rank): code, message, ranks, count."""
    groups: dict[tuple[str, str], JSON] = {}
    for w in warnings:
        rank = w.get("rank")
        label = str(rank) if rank is not None else None
        key = (str(w.get("code")), _template(str(w.get("message")), label))
        group = groups.setdefault(key, {"code": key[0], "template": key[1], "ranks": {}})
        if label is not None:
            group["ranks"][label] = None  # a dict keeps the order and checks membership at once
    out = []
    for g in groups.values():
        labels = list(g["ranks"])
        out.append({"code": g["code"], "message": _grouped_message(g["template"], labels),
                    "ranks": labels[:MAX_LABELS], "ranks_omitted": max(0, len(labels) - MAX_LABELS),
                    "count": max(1, len(labels))})  # fmt: skip
    return out

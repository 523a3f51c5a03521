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


def _template(message: str, rank: str | None) -> str:
    if not rank:
        return message
    return re.sub(rf"\brank {re.escape(rank)}(?=[\s:,;)]|$)", "rank {}", message)


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
        group = groups.setdefault(key, {"code": key[0], "template": key[1], "ranks": []})
        if label is not None and label not in group["ranks"]:
            group["ranks"].append(label)
    return [
        {"code": g["code"], "message": _grouped_message(g["template"], g["ranks"]), "ranks": g["ranks"],
         "count": max(1, len(g["ranks"]))}
        for g in groups.values()
    ]

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


#: app.core.plan's `rank_outlier` KV warning, its rank taken out: "rank {} has <KV> of KV, far from the median <M>".
_OUTLIER_HEAD, _OUTLIER_MID = "rank {} has ", " of KV, far from the median "
_UNITS = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}


def _size(text: str) -> float | None:
    """The bytes of a `units.fmt_bytes` text ("-1.25 GiB", "131,072 B"), None for anything else."""
    number, _, unit = text.partition(" ")
    try:
        return float(number.replace(",", "")) * _UNITS[unit]
    except (KeyError, ValueError):
        return None


def _outlier_key(template: str) -> tuple[str, str, float] | None:
    """(median text, "below" / "above", the rank's KV) of a KV outlier warning; None for another message."""
    if not template.startswith(_OUTLIER_HEAD) or _OUTLIER_MID not in template:
        return None
    kv_text, _, median_text = template[len(_OUTLIER_HEAD):].partition(_OUTLIER_MID)
    kv, median = _size(kv_text), _size(median_text)
    if kv is None or median is None:
        return None
    return median_text, "below" if kv < median else "above", kv


def group_warnings(warnings: Iterable[Mapping[str, Any]]) -> list[JSON]:
    """One entry per distinct (code, message without its rank): code, message, ranks, count.
    KV outliers (`rank_outlier`, each with its own KV) group by the median and the side of it
    they are on: one entry saying how many ranks, their KV range and the two ends as examples."""
    groups: dict[tuple[str, ...], JSON] = {}
    for w in warnings:
        rank = w.get("rank")
        label = str(rank) if rank is not None else None
        code, template = str(w.get("code")), _template(str(w.get("message")), label)
        outlier = _outlier_key(template) if code == "rank_outlier" and label is not None else None
        key: tuple[str, ...] = (code, template) if outlier is None else (code, _OUTLIER_MID, outlier[0], outlier[1])
        group = groups.setdefault(key, {"code": code, "template": template, "ranks": {}, "kv": {}})
        if label is not None and label not in group["ranks"]:
            group["ranks"][label] = None  # a dict keeps the order and checks membership at once
            if outlier is not None:
                group["kv"][label] = (outlier[2], template[len(_OUTLIER_HEAD):].partition(_OUTLIER_MID)[0])
    out = []
    for key, g in groups.items():
        labels = list(g["ranks"])
        message = (_outlier_message(labels, g["kv"], key[2], key[3]) if len(key) == 4 and len(labels) > 1
                   else _grouped_message(g["template"], labels))  # fmt: skip
        out.append({"code": g["code"], "message": message,
                    "ranks": labels[:MAX_LABELS], "ranks_omitted": max(0, len(labels) - MAX_LABELS),
                    "count": max(1, len(labels))})  # fmt: skip
    return out


def _outlier_message(labels: list[str], kv: Mapping[str, tuple[float, str]], median: str, side: str) -> str:
    """"ranks A, B, … (812 ranks): 35.10 GiB to 38.00 GiB of KV, far below the median 40.20 GiB
    (the least: rank A, 35.10 GiB; the most: rank B, 38.00 GiB)"."""
    least = min(labels, key=lambda label: kv[label][0])
    most = max(reversed(labels), key=lambda label: kv[label][0])  # the first of equal ones, as `least`
    low, high = kv[least][1], kv[most][1]
    return (f"ranks {rank_span(labels)}: {low} to {high} of KV, far {side} the median {median} "
            f"(the least: rank {least}, {low}; the most: rank {most}, {high})")

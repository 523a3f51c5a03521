"""Large plans summarised: groups of identical ranks and distributions instead of one object per rank.

Up to `FULL_RANKS_MAX` ranks the JSON result lists every rank (`ranks_form: "full"`, as always).
Above it (`ranks_form: "grouped"`), ranks with the same rows — every ledger cell (bytes and
where it came from), the budget, KV, blocks, tokens, stranded bytes and whether the rank starts —
form one group, and the result carries:

- `rank_groups`: one entry per group (at most `MAX_GROUPS`; past that the groups with the least KV,
  which bind first, are kept and `rank_groups_omitted` counts the rest), each with its rank
  positions as ranges ("0–63, 128–191"; at most `MAX_RANGES` ranges spelled out), its count and the
  index in `ranks` of its representative;
- `ranks`: the representative of each listed group (its first rank, or the binding rank for the
  group that holds it), with the same keys as a full-form rank;
- `rank_distribution` (both forms): min / median / max over every rank of KV, free memory at start
  and total memory, and the binding rank.

So a 100,000-rank plan answers in a few hundred kilobytes whatever its shape, and a plan of
identical ranks answers in a few kilobytes.
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import mul, sub
from typing import Any, cast

JSON = dict[str, Any]

#: Plans with at most this many ranks list every rank; larger ones are grouped.
FULL_RANKS_MAX = 1024
#: Groups listed in the grouped form (those with the least KV first when there are more).
MAX_GROUPS = 256
#: Index ranges spelled out per group.
MAX_RANGES = 64


def index_ranges(indexes: Sequence[int]) -> list[list[int]]:
    """Sorted positions as inclusive [first, last] runs: [0, 1, 2, 5] → [[0, 2], [5, 5]]."""
    out: list[list[int]] = []
    for i in indexes:
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def ranges_text(ranges: Sequence[Sequence[int]], total_ranges: int | None = None) -> str:
    """"0–63, 128–191" (an en dash per run; "… and N more ranges" when some are left out)."""
    text = ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in ranges)
    more = (total_ranges or len(ranges)) - len(ranges)
    return f"{text}, … and {more:,} more ranges" if more > 0 else text


def group_indexes(keys: Sequence[object], binding: int | None) -> list[tuple[int, list[int]]]:
    """Positions grouped by equal key, in order of first appearance: (representative, members).
    The representative is the group's first position, or `binding` in the group that holds it."""
    groups: dict[object, list[int]] = {}
    for i, key in enumerate(keys):
        members = groups.get(key)
        if members is None:
            groups[key] = [i]
        else:
            members.append(i)
    out = []
    for members in groups.values():
        rep = binding if binding is not None and keys[binding] == keys[members[0]] else members[0]
        out.append((rep, members))
    return out


def shown_groups(
    groups: list[tuple[int, list[int]]], kv_of: Callable[[int], int], limit: int = MAX_GROUPS
) -> list[tuple[int, list[int]]]:
    """At most `limit` groups: all when there are no more, else those with the least KV (the ones
    that bind under a change), in their original order."""
    if len(groups) <= limit:
        return groups
    keep = sorted(range(len(groups)), key=lambda g: kv_of(groups[g][0]))[:limit]
    return [groups[g] for g in sorted(keep)]


def group_json(members: Sequence[int], index_in_ranks: int) -> JSON:
    runs = index_ranges(members)
    shown = runs[:MAX_RANGES]
    return {
        "count": len(members),
        "ranks": ranges_text(shown, len(runs)),
        "index_ranges": shown,
        "index_ranges_omitted": len(runs) - len(shown),
        "representative": index_in_ranks,
    }


def spread(values: Sequence[int | None], ordered: Sequence[int] | None = None) -> JSON | None:
    """min / median (as an integer, as the uniform budget's) / max of the known values, and how
    many are known; None when none is. `ordered`: the values already sorted (all known)."""
    if ordered is not None:
        if not ordered:
            return None
        n = len(ordered)
        median = ordered[n // 2] if n % 2 == 1 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2  # statistics.median
        return {"min": ordered[0], "median": int(median), "max": ordered[-1], "known": n}
    known = [v for v in values if v is not None] if None in values else cast("Sequence[int]", values)
    if not known:
        return None
    return {"min": min(known), "median": int(statistics.median(known)), "max": max(known), "known": len(known)}


def histogram(values: Sequence[int], max_bins: int = 40, ordered: Sequence[int] | None = None) -> JSON | None:
    """Counts of `values` in equal bins from their min to their max (√n bins, at most `max_bins`;
    one bin when all are equal); the last bin holds the max. `ordered`: the values sorted, whose
    bins are then found by bisection (a value's bin never falls as the value rises)."""
    if not values:
        return None
    low, high = (ordered[0], ordered[-1]) if ordered is not None else (min(values), max(values))
    bins = max(1, min(max_bins, math.ceil(math.sqrt(len(values))))) if high > low else 1
    if bins == 1:
        return {"low_bytes": low, "high_bytes": high, "counts": [len(values)]}
    scale = bins / (high - low)
    if ordered is not None:
        # the first position of each bin b ≥ 1 (int((v − low) × scale) ≥ b); bins past the last go to the last
        starts = [0, *(bisect_left(ordered, b, key=lambda v: int((v - low) * scale)) for b in range(1, bins)),
                  len(ordered)]  # fmt: skip
        return {"low_bytes": low, "high_bytes": high, "counts": list(map(sub, starts[1:], starts[:-1]))}
    found = Counter(map(int, map(mul, map(sub, values, repeat(low)), repeat(scale))))  # int((v − low) × scale)
    counts = [found.get(b, 0) for b in range(bins)]
    counts[-1] += sum(c for b, c in found.items() if b >= bins)  # the max's own bin: min(index, bins − 1)
    return {"low_bytes": low, "high_bytes": high, "counts": counts}

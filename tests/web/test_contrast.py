"""Issue 17 item 15: helper text meets WCAG 2.x AA contrast (4.5:1) on the page's backgrounds,
computed from the colours in static/app.css (the relative-luminance formula of WCAG 2.1 §1.4.3)."""

from __future__ import annotations

import re
from pathlib import Path

CSS = (Path(__file__).resolve().parents[2] / "static" / "app.css").read_text(encoding="utf-8")
VARS = {name: value if len(value) == 7 else "#" + "".join(c * 2 for c in value[1:])
        for name, value in re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{6}|#[0-9a-fA-F]{3})\b", CSS)}
BACKGROUNDS = ("card", "bg", "bad-soft", "accent-soft")  # every surface helper text sits on


def _luminance(hex_colour: str) -> float:
    channels = [int(hex_colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(fg: str, bg: str) -> float:
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_the_formula_matches_known_pairs() -> None:
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0
    assert round(contrast("#777777", "#ffffff"), 2) == 4.48  # the classic just-failing grey


def test_every_helper_text_colour_meets_4_5_to_1() -> None:
    helper = set(re.findall(r"color:\s*var\(--(muted|faint)\)", CSS))
    assert helper == {"muted", "faint"}  # every helper text rule uses one of the two
    for name in helper:
        for bg in BACKGROUNDS:
            ratio = contrast(VARS[name], VARS[bg])
            assert ratio >= 4.5, (name, VARS[name], bg, VARS[bg], round(ratio, 2))
